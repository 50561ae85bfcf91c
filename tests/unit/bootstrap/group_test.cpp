// SPDX-License-Identifier: Apache-2.0
// Group (the TCP connections between the ranks of a communicator) on loopback, ranks as threads.
#include "bootstrap/group.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <future>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/socket_io.h"
#include "hzc_test.h"

namespace hzc::bootstrap {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using Clock = Group::Clock;
using Made = Expected<std::unique_ptr<Group>>;

Group::Blob Bytes(const std::string &text) {
  const auto *p = reinterpret_cast<const std::byte *>(text.data());
  return Group::Blob(p, p + text.size());
}

std::string Text(const Group::Blob &blob) {
  return std::string(reinterpret_cast<const char *>(blob.data()), blob.size());
}

class GroupTest : public test::Test {
 protected:
  void TearDown() override {
    listeners_.clear();  // before the check for leaked descriptors
    test::Test::TearDown();
  }

  // @n listeners on loopback and their addresses.
  void Listen(uint32_t n) {
    for (uint32_t r = 0; r < n; ++r) {
      auto l = Listener::Open("127.0.0.1");
      ASSERT_TRUE(l.ok()) << l.status().message();
      addresses_.push_back(l->address());
      listeners_.push_back(std::move(*l));
    }
  }

  // Connect @ranks (their listeners are consumed) concurrently, each until @timeout.
  std::vector<Made> ConnectRanks(const std::vector<uint32_t> &ranks, milliseconds timeout,
                                 const UniqueId &id = UniqueId{7}) {
    const auto deadline = Clock::now() + timeout;
    std::vector<std::future<Made>> futures;
    for (uint32_t r : ranks) {
      futures.push_back(std::async(std::launch::async, [this, r, id, deadline] {
        return Group::Connect(std::move(listeners_[r]), id, r, addresses_, deadline);
      }));
    }
    std::vector<Made> out;
    for (auto &f : futures) {
      out.push_back(f.get());
    }
    return out;
  }

  // All @n ranks connected, or an empty vector (with a failure).
  std::vector<std::unique_ptr<Group>> All(uint32_t n) {
    Listen(n);
    std::vector<uint32_t> ranks;
    for (uint32_t r = 0; r < n; ++r) {
      ranks.push_back(r);
    }
    std::vector<std::unique_ptr<Group>> groups;
    for (auto &g : ConnectRanks(ranks, seconds(10))) {
      EXPECT_TRUE(g.ok()) << g.status().message();
      if (!g.ok()) {
        return {};
      }
      groups.push_back(std::move(*g));
    }
    return groups;
  }

  std::vector<Listener> listeners_;
  std::vector<std::string> addresses_;
};

TEST_F(GroupTest, ListenerAddress) {
  auto l = Listener::Open("127.0.0.1");
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_THAT(l->address(), StartsWith("127.0.0.1:"));
  EXPECT_TRUE(ParseEndpoint(l->address()).ok());
  auto automatic = Listener::Open("");
  ASSERT_TRUE(automatic.ok()) << automatic.status().message();
  EXPECT_TRUE(ParseEndpoint(automatic->address()).ok()) << automatic->address();
  auto bad = Listener::Open("not-an-ip");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), HCCL_E_TCP_CONNECT);
  EXPECT_THAT(bad.status().message(), HasSubstr("not-an-ip"));
}

TEST_F(GroupTest, TwoAndFourRanksAllGather) {
  for (uint32_t n : {2U, 4U}) {
    listeners_.clear();
    addresses_.clear();
    auto groups = All(n);
    ASSERT_EQ(groups.size(), n);
    std::vector<uint32_t> members;
    for (uint32_t r = 0; r < n; ++r) {
      EXPECT_EQ(groups[r]->rank(), r);
      EXPECT_EQ(groups[r]->size(), n);
      members.push_back(r);
    }
    std::vector<std::future<Expected<std::vector<Group::Blob>>>> futures;
    for (uint32_t r = 0; r < n; ++r) {
      futures.push_back(std::async(std::launch::async, [&, r] {
        return groups[r]->AllGather(members, 5, Bytes("from " + std::to_string(r)),
                                    Clock::now() + seconds(10), "test");
      }));
    }
    for (uint32_t r = 0; r < n; ++r) {
      auto all = futures[r].get();
      ASSERT_TRUE(all.ok()) << all.status().message();
      ASSERT_EQ(all->size(), n);
      for (uint32_t s = 0; s < n; ++s) {
        EXPECT_EQ(Text((*all)[s]), "from " + std::to_string(s)) << "rank " << r;
      }
      EXPECT_TRUE(groups[r]->Broken((r + 1) % n).empty());
    }
  }
}

// Four ranks gather 1 MiB each: every rank sends 3 MiB before it receives anything, more than
// loopback sockets hold, so a rank that did not read while it sends would wait forever.
TEST_F(GroupTest, AllGatherOfOneMiBEach) {
  auto groups = All(4);
  ASSERT_EQ(groups.size(), 4U);
  const std::vector<uint32_t> members{0, 1, 2, 3};
  std::vector<std::future<Expected<std::vector<Group::Blob>>>> futures;
  for (uint32_t r = 0; r < 4; ++r) {
    futures.push_back(std::async(std::launch::async, [&, r] {
      const Group::Blob mine(1U << 20, std::byte(r + 1));
      return groups[r]->AllGather(members, 1, mine, Clock::now() + seconds(20), "big");
    }));
  }
  for (uint32_t r = 0; r < 4; ++r) {
    auto all = futures[r].get();
    ASSERT_TRUE(all.ok()) << all.status().message();
    for (uint32_t s = 0; s < 4; ++s) {
      EXPECT_EQ((*all)[s], Group::Blob(1U << 20, std::byte(s + 1)));
    }
  }
}

// Threads of each rank use one group at once, each on a tag of its own, with messages large
// enough to fill the sockets: every frame arrives whole, in order, at the receive of its tag.
TEST_F(GroupTest, ThreadsShareAGroupTagByTag) {
  auto groups = All(3);
  ASSERT_EQ(groups.size(), 3U);
  constexpr uint32_t kThreads = 4, kRounds = 20;
  const auto deadline = Clock::now() + seconds(60);
  std::vector<std::future<std::string>> futures;
  for (uint32_t r = 0; r < 3; ++r) {
    for (uint32_t t = 0; t < kThreads; ++t) {
      futures.push_back(std::async(std::launch::async, [&, r, t]() -> std::string {
        const std::vector<uint32_t> members{0, 1, 2};
        for (uint32_t i = 0; i < kRounds; ++i) {
          // Sizes vary with the thread and the round, up to 256 KiB + 3 bytes.
          const size_t len = ((t * kRounds + i) % 5) * 65536 + t + 1;
          const Group::Blob mine(len, std::byte(r * 64 + t * 16 + i % 16));
          auto all = groups[r]->AllGather(members, 100 + t, mine, deadline, "threads");
          if (!all.ok()) {
            return all.status().message();
          }
          for (uint32_t s = 0; s < 3; ++s) {
            if ((*all)[s] != Group::Blob(len, std::byte(s * 64 + t * 16 + i % 16))) {
              return "rank " + std::to_string(r) + " thread " + std::to_string(t) + " round " +
                     std::to_string(i) + ": rank " + std::to_string(s) + "'s blob is wrong";
            }
          }
        }
        return "";
      }));
    }
  }
  for (auto &f : futures) {
    EXPECT_EQ(f.get(), "");
  }
}

TEST_F(GroupTest, ReceivesByTagInAnyOrder) {
  auto groups = All(2);
  ASSERT_EQ(groups.size(), 2U);
  const auto deadline = Clock::now() + seconds(5);
  ASSERT_TRUE(groups[0]->Send(1, 1, Bytes("a"), deadline).ok());
  ASSERT_TRUE(groups[0]->Send(1, 2, Bytes("b"), deadline).ok());
  ASSERT_TRUE(groups[0]->Send(1, 1, Bytes("c"), deadline).ok());
  ASSERT_TRUE(groups[0]->Send(1, 3, {}, deadline).ok());
  auto b = groups[1]->Recv(0, 2, deadline);
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(Text(*b), "b");
  auto empty = groups[1]->Recv(0, 3, deadline);
  ASSERT_TRUE(empty.ok()) << empty.status().message();
  EXPECT_TRUE(empty->empty());
  auto a = groups[1]->Recv(0, 1, deadline);
  auto c = groups[1]->Recv(0, 1, deadline);
  ASSERT_TRUE(a.ok() && c.ok());
  EXPECT_EQ(Text(*a), "a");
  EXPECT_EQ(Text(*c), "c");
  auto none = groups[1]->Recv(0, 1, Clock::now() + milliseconds(100));
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), HCCL_E_TIMEOUT);
  EXPECT_THAT(none.status().message(), HasSubstr("(tag 1) from rank 0 (" + addresses_[0] + ")"));
}

TEST_F(GroupTest, OneMiBIsTheLargestMessage) {
  auto groups = All(2);
  ASSERT_EQ(groups.size(), 2U);
  const auto deadline = Clock::now() + seconds(10);
  Group::Blob big(1U << 20);
  for (size_t i = 0; i < big.size(); ++i) {
    big[i] = std::byte(i * 7 + 3);
  }
  auto sent = std::async(std::launch::async, [&] { return groups[1]->Send(0, 9, big, deadline); });
  auto got = groups[0]->Recv(1, 9, deadline);
  ASSERT_TRUE(sent.get().ok());
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(*got, big);
  big.push_back(std::byte{0});
  Status over = groups[1]->Send(0, 9, big, deadline);
  EXPECT_EQ(over.code(), HCCL_E_PARA);
  EXPECT_THAT(over.message(), HasSubstr("1048577 bytes to rank 0 (" + addresses_[0] + ")"));
  EXPECT_EQ(groups[1]->Send(1, 9, Bytes("x"), deadline).code(), HCCL_E_PARA);  // itself
  EXPECT_EQ(groups[1]->Recv(2, 9, deadline).status().code(), HCCL_E_PARA);
  // The refused message did not spoil the connection.
  ASSERT_TRUE(groups[1]->Send(0, 9, Bytes("after"), deadline).ok());
  auto after = groups[0]->Recv(1, 9, deadline);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(Text(*after), "after");
}

TEST_F(GroupTest, PeerThatClosesIsRemoteNamingIt) {
  auto groups = All(3);
  ASSERT_EQ(groups.size(), 3U);
  const auto deadline = Clock::now() + seconds(5);
  ASSERT_TRUE(groups[2]->Send(0, 4, Bytes("last words"), deadline).ok());
  groups[2].reset();
  std::string broken;
  for (int i = 0; i < 100 && broken.empty(); ++i) {
    std::this_thread::sleep_for(milliseconds(20));
    broken = groups[0]->Broken(2);
  }
  EXPECT_EQ(broken, "rank 2 (" + addresses_[2] + ") closed the connection");
  EXPECT_TRUE(groups[0]->Broken(1).empty());
  // What it sent before is still received; then the end.
  auto last = groups[0]->Recv(2, 4, deadline);
  ASSERT_TRUE(last.ok()) << last.status().message();
  EXPECT_EQ(Text(*last), "last words");
  auto more = groups[0]->Recv(2, 4, deadline);
  EXPECT_EQ(more.status().code(), HCCL_E_REMOTE);
  EXPECT_EQ(more.status().message(), broken);
  EXPECT_EQ(groups[0]->Send(2, 4, Bytes("x"), deadline).code(), HCCL_E_REMOTE);
  // Rank 1 learns it while gathering.
  const std::vector<uint32_t> members{0, 1, 2};
  auto all = groups[1]->AllGather(members, 6, Bytes("y"), deadline, "link setup");
  ASSERT_FALSE(all.ok());
  EXPECT_EQ(all.status().code(), HCCL_E_REMOTE);
  EXPECT_THAT(all.status().message(),
              StartsWith("link setup: rank 2 (" + addresses_[2] + ") closed the connection"));
}

// A peer that goes away with a message it did not read resets the connection (as when its
// process dies): the same HCCL_E_REMOTE naming it.
TEST_F(GroupTest, PeerThatResetsIsRemoteNamingIt) {
  auto groups = All(2);
  ASSERT_EQ(groups.size(), 2U);
  const auto deadline = Clock::now() + seconds(5);
  ASSERT_TRUE(groups[0]->Send(1, 1, Bytes("never read"), deadline).ok());
  std::this_thread::sleep_for(milliseconds(50));  // in rank 1's socket, unread
  groups[1].reset();
  std::string broken;
  for (int i = 0; i < 100 && broken.empty(); ++i) {
    std::this_thread::sleep_for(milliseconds(20));
    broken = groups[0]->Broken(1);
  }
  EXPECT_THAT(broken, StartsWith("rank 1 (" + addresses_[1] + ") closed the connection"));
  EXPECT_EQ(groups[0]->Recv(1, 1, deadline).status().code(), HCCL_E_REMOTE);
  EXPECT_EQ(groups[0]->Send(1, 1, Bytes("x"), deadline).code(), HCCL_E_REMOTE);
}

// A connection of another communicator's rank and one that sends junk reach rank 1 first: it
// refuses both and connects with its real rank 0.
TEST_F(GroupTest, ForeignHandshakesAreRefused) {
  Listen(2);
  auto stranger = Listener::Open("127.0.0.1");
  ASSERT_TRUE(stranger.ok());
  const std::vector<std::string> foreign_addresses{stranger->address(), addresses_[1]};
  auto foreign = std::async(std::launch::async, [&] {
    return Group::Connect(std::move(*stranger), UniqueId{99}, 0, foreign_addresses,
                          Clock::now() + seconds(5));
  });
  auto target = ParseEndpoint(addresses_[1]);
  ASSERT_TRUE(target.ok());
  UniqueFd junk(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_EQ(connect(junk.get(), reinterpret_cast<const sockaddr *>(&*target), AddrLen(*target)), 0);
  const std::string garbage(64, 'z');
  ASSERT_EQ(send(junk.get(), garbage.data(), garbage.size(), MSG_NOSIGNAL), 64);
  std::this_thread::sleep_for(milliseconds(200));  // both wait in rank 1's backlog
  auto real = ConnectRanks({0, 1}, seconds(5));
  for (auto &g : real) {
    ASSERT_TRUE(g.ok()) << g.status().message();
  }
  auto f = foreign.get();
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(f.status().message(), HasSubstr("did not answer the handshake"));
  const auto deadline = Clock::now() + seconds(5);
  ASSERT_TRUE((*real[0])->Send(1, 1, Bytes("hello"), deadline).ok());
  auto got = (*real[1])->Recv(0, 1, deadline);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(Text(*got), "hello");
}

TEST_F(GroupTest, TimeoutNamesTheMissingRanks) {
  Listen(4);  // rank 3 listens but never connects
  auto made = ConnectRanks({0, 1, 2}, milliseconds(1000));
  for (uint32_t r = 0; r < 3; ++r) {
    ASSERT_FALSE(made[r].ok()) << "rank " << r;
    EXPECT_EQ(made[r].status().code(), HCCL_E_TIMEOUT);
    EXPECT_THAT(made[r].status().message(), HasSubstr("rank(s) 3 of 4 did not connect in time"));
  }
}

TEST_F(GroupTest, BadAddressIsTcpConnect) {
  Listen(2);
  auto malformed = Group::Connect(std::move(listeners_[0]), UniqueId{1}, 0,
                                  {addresses_[0], "nowhere"}, Clock::now() + seconds(1));
  ASSERT_FALSE(malformed.ok());
  EXPECT_EQ(malformed.status().code(), HCCL_E_TCP_CONNECT);
  EXPECT_THAT(malformed.status().message(), HasSubstr("rank 1's address: \"nowhere\""));
  // Rank 1's listener closed: nobody accepts there.
  const std::string gone = addresses_[1];
  listeners_[1] = Listener();
  auto again = Listener::Open("127.0.0.1");
  ASSERT_TRUE(again.ok());
  const std::string self = again->address();
  auto refused = Group::Connect(std::move(*again), UniqueId{1}, 0, {self, gone},
                                Clock::now() + milliseconds(300));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), HCCL_E_TCP_CONNECT);
  EXPECT_THAT(refused.status().message(), HasSubstr("cannot connect to rank 1 (" + gone + ")"));
}

}  // namespace
}  // namespace hzc::bootstrap
