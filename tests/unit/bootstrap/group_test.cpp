// SPDX-License-Identifier: Apache-2.0
// Group (the TCP connections between the ranks of a communicator) on loopback, ranks as threads.
#include "bootstrap/group.h"

#include <arpa/inet.h>
#include <endian.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <future>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "base/rank_list.h"
#include "bootstrap/auth.h"
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

// A connection to @address, as any host on the network can make; invalid (with a failure) if none.
UniqueFd Dial(const std::string &address) {
  auto target = ParseEndpoint(address);
  EXPECT_TRUE(target.ok()) << address;
  UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const timeval wait{.tv_sec = 5, .tv_usec = 0};  // for what is read below
  if (!target.ok() || setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait)) != 0 ||
      connect(fd.get(), reinterpret_cast<const sockaddr *>(&*target), AddrLen(*target)) != 0) {
    ADD_FAILURE() << "cannot connect to " << address << ": " << strerror(errno);
    return UniqueFd();
  }
  return fd;
}

void SendRaw(int fd, const std::string &bytes) {
  EXPECT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
}

// How a raw rank makes the handshake.
struct Raw {
  std::optional<UniqueId> proof_key{};  // nullopt: the key its hello names
  std::string source{};                 // the address it connects from; empty: the kernel's choice
  bool reflect = false;                 // it sends back the answer's proof as its own
  bool hello_only = false;              // it sends its hello and waits for nothing
};

// A raw connection to rank @to at @address that makes the handshake as rank @from of @size ranks
// of communicator @id (what any peer that holds the id can do: its hello, then its proof once the
// answer came), as @how says; invalid (with a failure) when it is not answered.
UniqueFd FakeRank(const std::string &address, const UniqueId &id, uint32_t from, uint32_t to,
                  uint32_t size, const Raw &how = {}) {
  auto target = ParseEndpoint(address);
  UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const timeval wait{.tv_sec = 5, .tv_usec = 0};
  EXPECT_EQ(setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait)), 0);
  if (!how.source.empty()) {
    const sockaddr_storage src = *ParseAddress(how.source);
    EXPECT_EQ(bind(fd.get(), reinterpret_cast<const sockaddr *>(&src), AddrLen(src)), 0);
  }
  EXPECT_EQ(connect(fd.get(), reinterpret_cast<const sockaddr *>(&*target), AddrLen(*target)), 0);
  uint32_t hello[12] = {htonl(0x48475a33), htonl(from), htonl(to), htonl(size)};  // "HGZ3"
  const UniqueId tag = KeyedId(id, "hzc-group-tag");
  const Nonce nonce = *RandomNonce();
  std::memcpy(&hello[4], tag.data(), tag.size());
  std::memcpy(&hello[8], nonce.data(), nonce.size());
  SendRaw(fd.get(), std::string(reinterpret_cast<const char *>(hello), sizeof(hello)));
  if (how.hello_only) {
    return fd;
  }
  uint8_t answer[80];
  if (recv(fd.get(), answer, sizeof(answer), MSG_WAITALL) != static_cast<ssize_t>(sizeof(answer))) {
    ADD_FAILURE() << "rank " << to << " did not answer the handshake";
    return UniqueFd();
  }
  const Mac proof = Prove(how.proof_key.value_or(id), "hzc-group-connect",
                          {std::span(reinterpret_cast<const uint8_t *>(hello), sizeof(hello)),
                           std::span(answer + 32, 16)});
  uint8_t msg[36];
  const uint32_t magic = htonl(0x48475a50);  // "HGZP"
  std::memcpy(msg, &magic, sizeof(magic));
  std::memcpy(msg + 4, how.reflect ? answer + 48 : proof.data(), 32);
  SendRaw(fd.get(), std::string(reinterpret_cast<const char *>(msg), sizeof(msg)));
  return fd;
}

// A frame as Group sends it (space, tag, length, in network order), its length @len whatever
// the size of @payload.
std::string Frame(uint64_t space, uint32_t tag, uint32_t len, const std::string &payload) {
  const uint64_t s = htobe64(space);
  const uint32_t t = htonl(tag), l = htonl(len);
  return std::string(reinterpret_cast<const char *>(&s), sizeof(s)) +
         std::string(reinterpret_cast<const char *>(&t), sizeof(t)) +
         std::string(reinterpret_cast<const char *>(&l), sizeof(l)) + payload;
}

// Whether the other end of @fd ended the connection (within 5 s): EOF or a reset.
bool Ends(int fd) {
  char buf[4096];
  for (;;) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) {
      return n == 0 || errno == ECONNRESET;
    }
  }
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
    return ConnectRanks(ranks, std::vector<milliseconds>(ranks.size(), timeout), id);
  }
  // The same, rank @ranks[i] until @timeouts[i].
  std::vector<Made> ConnectRanks(const std::vector<uint32_t> &ranks,
                                 const std::vector<milliseconds> &timeouts,
                                 const UniqueId &id = UniqueId{7}) {
    std::vector<std::future<Made>> futures;
    for (size_t i = 0; i < ranks.size(); ++i) {
      const uint32_t r = ranks[i];
      const auto deadline = Clock::now() + timeouts[i];
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

  // Ranks 1.. of @n as Groups, rank 0 a raw socket to each of them that passed the handshake
  // (*@fakes, by rank; [0] invalid): a peer that knows the communicator id and breaks the protocol.
  std::vector<std::unique_ptr<Group>> WithFakeRankZero(uint32_t n, std::vector<UniqueFd> *fakes) {
    Listen(n);  // rank 0's listener stays unused: nobody dials the lowest rank
    std::vector<uint32_t> ranks;
    for (uint32_t r = 1; r < n; ++r) {
      ranks.push_back(r);
    }
    auto real = std::async(std::launch::async, [&] { return ConnectRanks(ranks, seconds(5)); });
    fakes->resize(n);
    for (uint32_t r = 1; r < n; ++r) {
      (*fakes)[r] = FakeRank(addresses_[r], UniqueId{7}, 0, r, n);
    }
    std::vector<std::unique_ptr<Group>> groups(1);
    for (auto &g : real.get()) {
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

// A view of ranks @members of @parent in @space, or nullptr (with a failure).
std::unique_ptr<Group> View(const Group &parent, std::vector<uint32_t> members, uint64_t space) {
  auto v = Group::Subgroup(parent, std::move(members), space);
  EXPECT_TRUE(v.ok()) << v.status().message();
  return v.ok() ? std::move(*v) : nullptr;
}

// A view numbers its ranks in the order of its members: rank 3 of four is rank 1 of {1, 3}.
TEST_F(GroupTest, SubgroupTranslatesRanks) {
  auto groups = All(4);
  ASSERT_EQ(groups.size(), 4U);
  auto one = View(*groups[1], {1, 3}, 5);
  auto three = View(*groups[3], {1, 3}, 5);
  ASSERT_TRUE(one && three);
  EXPECT_EQ(one->rank(), 0U);
  EXPECT_EQ(three->rank(), 1U);
  EXPECT_EQ(three->size(), 2U);
  EXPECT_EQ(three->space(), 5U);
  EXPECT_EQ(groups[3]->space(), 0U);
  const auto deadline = Clock::now() + seconds(5);
  ASSERT_TRUE(three->Send(0, 1, Bytes("to view rank 0"), deadline).ok());
  ASSERT_TRUE(one->Send(1, 1, Bytes("to view rank 1"), deadline).ok());
  auto at_one = one->Recv(1, 1, deadline);
  auto at_three = three->Recv(0, 1, deadline);
  ASSERT_TRUE(at_one.ok()) << at_one.status().message();
  ASSERT_TRUE(at_three.ok()) << at_three.status().message();
  EXPECT_EQ(Text(*at_one), "to view rank 0");
  EXPECT_EQ(Text(*at_three), "to view rank 1");
  // Three ranks of four gather over a view of them.
  const std::vector<uint32_t> members{0, 2, 3};
  std::vector<std::unique_ptr<Group>> views;
  for (uint32_t r : members) {
    views.push_back(View(*groups[r], members, 6));
    ASSERT_TRUE(views.back());
  }
  std::vector<std::future<Expected<std::vector<Group::Blob>>>> futures;
  for (uint32_t v = 0; v < 3; ++v) {
    futures.push_back(std::async(std::launch::async, [&, v] {
      return views[v]->AllGather(std::vector<uint32_t>{0, 1, 2}, 5,
                                 Bytes("view rank " + std::to_string(v)), deadline, "view");
    }));
  }
  for (uint32_t v = 0; v < 3; ++v) {
    auto all = futures[v].get();
    ASSERT_TRUE(all.ok()) << all.status().message();
    ASSERT_EQ(all->size(), 3U);
    for (uint32_t s = 0; s < 3; ++s) {
      EXPECT_EQ(Text((*all)[s]), "view rank " + std::to_string(s));
    }
  }
}

// The connections and two views of the same two ranks send under one tag: each receive takes
// its own group's message, whatever the order, and none takes another's.
TEST_F(GroupTest, SpacesKeepMessagesOfOneTagApart) {
  auto groups = All(2);
  ASSERT_EQ(groups.size(), 2U);
  auto a0 = View(*groups[0], {0, 1}, 11), a1 = View(*groups[1], {0, 1}, 11);
  auto b0 = View(*groups[0], {0, 1}, 12), b1 = View(*groups[1], {0, 1}, 12);
  ASSERT_TRUE(a0 && a1 && b0 && b1);
  const auto deadline = Clock::now() + seconds(5);
  ASSERT_TRUE(a0->Send(1, 7, Bytes("a"), deadline).ok());
  ASSERT_TRUE(groups[0]->Send(1, 7, Bytes("parent"), deadline).ok());
  ASSERT_TRUE(b0->Send(1, 7, Bytes("b"), deadline).ok());
  ASSERT_TRUE(a0->Send(1, 7, Bytes("a again"), deadline).ok());
  auto b = b1->Recv(0, 7, deadline);
  auto parent = groups[1]->Recv(0, 7, deadline);
  auto a = a1->Recv(0, 7, deadline);
  auto again = a1->Recv(0, 7, deadline);
  ASSERT_TRUE(a.ok() && b.ok() && parent.ok() && again.ok());
  EXPECT_EQ(Text(*b), "b");
  EXPECT_EQ(Text(*parent), "parent");
  EXPECT_EQ(Text(*a), "a");
  EXPECT_EQ(Text(*again), "a again");
  // A message of view b waits for b: the others time out.
  ASSERT_TRUE(b1->Send(0, 7, Bytes("only b"), deadline).ok());
  EXPECT_EQ(groups[0]->Recv(1, 7, Clock::now() + milliseconds(100)).status().code(),
            HCCL_E_TIMEOUT);
  EXPECT_EQ(a0->Recv(1, 7, Clock::now() + milliseconds(100)).status().code(), HCCL_E_TIMEOUT);
  auto only = b0->Recv(1, 7, deadline);
  ASSERT_TRUE(only.ok()) << only.status().message();
  EXPECT_EQ(Text(*only), "only b");
}

// A view of a view: rank 1 of {0, 2} of {0, 1, 3} is rank 3 of the connections, and its
// messages are kept apart from those of the outer view and of the connections.
TEST_F(GroupTest, NestedSubgroupsCompose) {
  auto groups = All(4);
  ASSERT_EQ(groups.size(), 4U);
  auto outer0 = View(*groups[0], {0, 1, 3}, 21), outer3 = View(*groups[3], {0, 1, 3}, 21);
  ASSERT_TRUE(outer0 && outer3);
  auto inner0 = View(*outer0, {0, 2}, 22), inner3 = View(*outer3, {0, 2}, 22);
  ASSERT_TRUE(inner0 && inner3);
  EXPECT_EQ(inner3->rank(), 1U);
  EXPECT_EQ(inner3->size(), 2U);
  const auto deadline = Clock::now() + seconds(5);
  ASSERT_TRUE(inner3->Send(0, 3, Bytes("inner"), deadline).ok());
  ASSERT_TRUE(outer3->Send(0, 3, Bytes("outer"), deadline).ok());
  ASSERT_TRUE(groups[3]->Send(0, 3, Bytes("connections"), deadline).ok());
  auto connections = groups[0]->Recv(3, 3, deadline);
  auto inner = inner0->Recv(1, 3, deadline);
  auto outer = outer0->Recv(2, 3, deadline);
  ASSERT_TRUE(inner.ok() && outer.ok() && connections.ok());
  EXPECT_EQ(Text(*inner), "inner");
  EXPECT_EQ(Text(*outer), "outer");
  EXPECT_EQ(Text(*connections), "connections");
  ASSERT_TRUE(inner0->Send(1, 3, Bytes("back"), deadline).ok());
  auto back = inner3->Recv(0, 3, deadline);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(Text(*back), "back");
  // Its errors name its own ranks: rank 1 is rank 3's address.
  auto none = inner0->Recv(1, 3, Clock::now() + milliseconds(100));
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.status().message(), HasSubstr("(tag 3) from rank 1 (" + addresses_[3] + ")"));
}

// HCCL lets a communicator be destroyed before its sub-communicators: a view keeps the
// connections, which close with the last view.
TEST_F(GroupTest, SubgroupOutlivesItsParent) {
  auto groups = All(3);
  ASSERT_EQ(groups.size(), 3U);
  auto v0 = View(*groups[0], {0, 2}, 31), v2 = View(*groups[2], {0, 2}, 31);
  ASSERT_TRUE(v0 && v2);
  groups.clear();
  const auto deadline = Clock::now() + seconds(5);
  const Group::Blob big(1U << 20, std::byte{0x5a});
  auto sent = std::async(std::launch::async, [&] { return v2->Send(0, 1, big, deadline); });
  auto got = v0->Recv(1, 1, deadline);
  ASSERT_TRUE(sent.get().ok());
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(*got, big);
  EXPECT_EQ(v0->Broken(1), "");
  // Rank 2's connections close with its last view.
  v2.reset();
  std::string broken;
  for (int i = 0; i < 100 && broken.empty(); ++i) {
    std::this_thread::sleep_for(milliseconds(20));
    broken = v0->Broken(1);
  }
  EXPECT_EQ(broken, "rank 1 (" + addresses_[2] + ") closed the connection");
}

// The errors of a view name peers by the view's ranks, the connections' by theirs.
TEST_F(GroupTest, SubgroupErrorsNameItsRanks) {
  auto groups = All(3);
  ASSERT_EQ(groups.size(), 3U);
  auto v0 = View(*groups[0], {0, 2}, 41), v2 = View(*groups[2], {0, 2}, 41);
  ASSERT_TRUE(v0 && v2);
  const auto deadline = Clock::now() + seconds(5);
  Status over = v0->Send(1, 1, Group::Blob((1U << 20) + 1), deadline);
  EXPECT_EQ(over.code(), HCCL_E_PARA);
  EXPECT_THAT(over.message(), HasSubstr("1048577 bytes to rank 1 (" + addresses_[2] + ")"));
  EXPECT_EQ(v0->Send(2, 1, Bytes("x"), deadline).code(), HCCL_E_PARA);  // no rank 2
  EXPECT_EQ(v0->Recv(0, 1, deadline).status().code(), HCCL_E_PARA);     // itself
  EXPECT_THAT(v0->Broken(2), HasSubstr("peer 2 is not another rank of this group (rank 0 of 2)"));
  // Connections are made when first needed: these two have one from here on.
  ASSERT_TRUE(v2->Send(0, 1, Bytes("hi"), deadline).ok());
  ASSERT_TRUE(v0->Recv(1, 1, deadline).ok());
  v2.reset();
  groups[2].reset();
  std::string broken;
  for (int i = 0; i < 100 && broken.empty(); ++i) {
    std::this_thread::sleep_for(milliseconds(20));
    broken = v0->Broken(1);
  }
  EXPECT_EQ(broken, "rank 1 (" + addresses_[2] + ") closed the connection");
  EXPECT_EQ(groups[0]->Broken(2), "rank 2 (" + addresses_[2] + ") closed the connection");
  Status sent = v0->Send(1, 1, Bytes("x"), deadline);
  EXPECT_EQ(sent.code(), HCCL_E_REMOTE);
  EXPECT_EQ(sent.message(), broken);
  auto all = v0->AllGather(std::vector<uint32_t>{0, 1}, 2, Bytes("y"), deadline, "link setup");
  ASSERT_FALSE(all.ok());
  EXPECT_EQ(all.status().message(), "link setup: " + broken);
  EXPECT_THAT(v0->Broken(0), HasSubstr("peer 0 is not another rank"));  // itself: why not
  EXPECT_TRUE(groups[0]->Broken(1).empty());
}

TEST_F(GroupTest, BadSubgroupsAreRefused) {
  auto groups = All(3);
  ASSERT_EQ(groups.size(), 3U);
  const Group &g = *groups[1];
  for (const std::vector<uint32_t> &members :
       std::vector<std::vector<uint32_t>>{{}, {2, 1}, {1, 1, 2}, {1, 3}, {0, 2}}) {
    auto v = Group::Subgroup(g, members, 1);
    ASSERT_FALSE(v.ok()) << RankList(members);
    EXPECT_EQ(v.status().code(), HCCL_E_PARA);
    EXPECT_THAT(v.status().message(), HasSubstr("ranks " + RankList(members) + " of a group of 3"));
  }
  auto zero = Group::Subgroup(g, {0, 1}, 0);
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.status().code(), HCCL_E_PARA);
  auto view = View(g, {1, 2}, 8);
  ASSERT_TRUE(view);
  auto same = Group::Subgroup(*view, {0, 1}, 8);  // the parent's space
  ASSERT_FALSE(same.ok());
  EXPECT_EQ(same.status().code(), HCCL_E_PARA);
  EXPECT_THAT(same.status().message(), HasSubstr("its parent's"));
  auto outside = Group::Subgroup(*view, {1}, 9);  // rank 0 of the view is rank 1
  ASSERT_FALSE(outside.ok());
  auto alone = Group::Subgroup(*view, {0}, 9);
  ASSERT_TRUE(alone.ok()) << alone.status().message();
  EXPECT_EQ((*alone)->size(), 1U);
}

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

// Descriptors this process has open.
size_t OpenDescriptors() {
  size_t n = 0;
  for ([[maybe_unused]] const auto &e : std::filesystem::directory_iterator("/proc/self/fd")) {
    ++n;
  }
  return n;
}

// Connections are made when first needed: a group of 8 holds only its listeners after Connect;
// a message from rank 0 to rank 5 makes one connection (a descriptor on each side), the reply
// takes the same one, and no other pair has any.
TEST_F(GroupTest, ConnectionsAreMadeWhenFirstNeeded) {
  const size_t before = OpenDescriptors();
  auto groups = All(8);
  ASSERT_EQ(groups.size(), 8U);
  EXPECT_EQ(OpenDescriptors(), before + 8);
  const auto deadline = Clock::now() + seconds(5);
  ASSERT_TRUE(groups[0]->Send(5, 1, Bytes("ping"), deadline).ok());
  auto ping = groups[5]->Recv(0, 1, deadline);
  ASSERT_TRUE(ping.ok()) << ping.status().message();
  ASSERT_TRUE(groups[5]->Send(0, 2, Bytes("pong"), deadline).ok());
  auto pong = groups[0]->Recv(5, 2, deadline);
  ASSERT_TRUE(pong.ok()) << pong.status().message();
  EXPECT_EQ(Text(*pong), "pong");
  EXPECT_EQ(OpenDescriptors(), before + 8 + 2);
}

// Bruck's all-gather, for every count of members up to 9 (powers of two and not), twice in a row
// on one tag, and among a subset of the ranks: each member gets every member's message in
// member order, having exchanged with ceil(log2 n) others (the descriptors: one connection per
// round and side).
TEST_F(GroupTest, AllGatherFixedOfEveryCount) {
  for (uint32_t n = 1; n <= 9; ++n) {
    listeners_.clear();
    addresses_.clear();
    auto groups = All(n);
    ASSERT_EQ(groups.size(), n);
    std::vector<uint32_t> members;
    for (uint32_t r = 0; r < n; ++r) {
      members.push_back(r);
    }
    for (int call = 0; call < 2; ++call) {
      std::vector<std::future<Expected<std::vector<Group::Blob>>>> futures;
      for (uint32_t r = 0; r < n; ++r) {
        futures.push_back(std::async(std::launch::async, [&, r] {
          return groups[r]->AllGatherFixed(members, 5, Bytes(fmt::format("{}:{:03}", call, r)),
                                           Clock::now() + seconds(10), "test");
        }));
      }
      for (uint32_t r = 0; r < n; ++r) {
        auto all = futures[r].get();
        ASSERT_TRUE(all.ok()) << "n " << n << " rank " << r << ": " << all.status().message();
        ASSERT_EQ(all->size(), n);
        for (uint32_t s = 0; s < n; ++s) {
          EXPECT_EQ(Text((*all)[s]), fmt::format("{}:{:03}", call, s)) << n << " " << r;
        }
      }
    }
  }
  // Members 0, 2 and 3 of 5.
  listeners_.clear();
  addresses_.clear();
  auto groups = All(5);
  const std::vector<uint32_t> some{0, 2, 3};
  std::vector<std::future<Expected<std::vector<Group::Blob>>>> futures;
  for (uint32_t r : some) {
    futures.push_back(std::async(std::launch::async, [&, r] {
      return groups[r]->AllGatherFixed(some, 6, Bytes(std::to_string(r)),
                                       Clock::now() + seconds(10), "test");
    }));
  }
  for (auto &f : futures) {
    auto all = f.get();
    ASSERT_TRUE(all.ok()) << all.status().message();
    ASSERT_EQ(all->size(), 3U);
    EXPECT_EQ(Text((*all)[0]) + Text((*all)[1]) + Text((*all)[2]), "023");
  }
}

// Two ranks that send each other a message at once, and one closes its group right after it has
// the other's: the other still gets its message, whatever became of the connection it dialed
// (the closing rank's listener resets it when its handshake is not done yet). Repeated: the
// timing differs from round to round.
TEST_F(GroupTest, ALastMessageArrivesWhenItsSendersGroupClosesAtOnce) {
  for (int round = 0; round < 40; ++round) {
    listeners_.clear();
    addresses_.clear();
    auto groups = All(2);
    ASSERT_EQ(groups.size(), 2U);
    const std::vector<uint32_t> members{0, 1};
    auto closing = std::async(std::launch::async, [&] {
      auto all =
          groups[1]->AllGatherFixed(members, 7, Bytes("one"), Clock::now() + seconds(10), "test");
      groups[1].reset();
      return all;
    });
    auto all =
        groups[0]->AllGatherFixed(members, 7, Bytes("nil"), Clock::now() + seconds(10), "test");
    ASSERT_TRUE(all.ok()) << "round " << round << ": " << all.status().message();
    EXPECT_EQ(Text((*all)[1]), "one");
    auto theirs = closing.get();
    ASSERT_TRUE(theirs.ok()) << "round " << round << ": " << theirs.status().message();
  }
}

// A member that is gone fails the others' exchange at once, not at the deadline: its neighbours
// learn it from the connection (it refuses), and each member that fails tells those it would
// have sent to in the rounds left.
TEST_F(GroupTest, AllGatherFixedFailsFastWhenAMemberIsGone) {
  auto groups = All(6);
  ASSERT_EQ(groups.size(), 6U);
  groups[2].reset();
  const std::vector<uint32_t> members{0, 1, 2, 3, 4, 5};
  const auto start = Clock::now();
  std::vector<std::future<Status>> futures;
  for (uint32_t r : {0U, 1U, 3U, 4U, 5U}) {
    futures.push_back(std::async(std::launch::async, [&, r] {
      return groups[r]
          ->AllGatherFixed(members, 8, Bytes("x"), Clock::now() + seconds(20), "test")
          .status();
    }));
  }
  for (auto &f : futures) {
    const Status st = f.get();
    EXPECT_EQ(st.code(), HCCL_E_REMOTE) << st.message();
  }
  EXPECT_LT(Clock::now() - start, seconds(10));
}

// A member whose message is not of the size the others' are is named.
TEST_F(GroupTest, AllGatherFixedNamesAMemberOfAnotherSize) {
  auto groups = All(2);
  ASSERT_EQ(groups.size(), 2U);
  const std::vector<uint32_t> members{0, 1};
  auto other = std::async(std::launch::async, [&] {
    return groups[1]->AllGatherFixed(members, 7, Bytes("longer"), Clock::now() + seconds(5), "t");
  });
  auto all = groups[0]->AllGatherFixed(members, 7, Bytes("x"), Clock::now() + seconds(5), "t");
  ASSERT_FALSE(all.ok());
  EXPECT_EQ(all.status().code(), HCCL_E_REMOTE);
  EXPECT_THAT(all.status().message(),
              HasSubstr("rank 1 (" + addresses_[1] + ") sent 6 bytes where 1 were due"));
  EXPECT_FALSE(other.get().ok());
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
  // Rank 1, which never had a connection with it, learns it while gathering: rank 2 refuses.
  const std::vector<uint32_t> members{0, 1, 2};
  auto all = groups[1]->AllGather(members, 6, Bytes("y"), deadline, "link setup");
  ASSERT_FALSE(all.ok());
  EXPECT_EQ(all.status().code(), HCCL_E_REMOTE);
  EXPECT_THAT(all.status().message(),
              StartsWith("link setup: rank 2 (" + addresses_[2] + ") is gone: it refuses"));
  EXPECT_EQ(groups[1]->Recv(2, 6, deadline).status().code(), HCCL_E_REMOTE);  // at once
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
  auto foreign = std::async(std::launch::async, [&]() -> Status {
    auto g = Group::Connect(std::move(*stranger), UniqueId{99}, 0, foreign_addresses,
                            Clock::now() + seconds(5));
    if (!g.ok()) {
      return g.status();
    }
    return (*g)->Send(1, 1, Bytes("let me in"), Clock::now() + seconds(5));
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
  const Status f = foreign.get();
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(f.message(), HasSubstr("handshake with rank 1 (" + addresses_[1] + ")"));
  const auto deadline = Clock::now() + seconds(5);
  ASSERT_TRUE((*real[0])->Send(1, 1, Bytes("hello"), deadline).ok());
  auto got = (*real[1])->Recv(0, 1, deadline);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(Text(*got), "hello");
}

// Issue 27: a peer that knows where rank 1 listens, and even the communicator's tag, but not its
// key, cannot take rank 0's place: its proof fails, and so does one that sends back rank 1's own
// proof; one from an address off the trust list is dropped before. Rank 1 connects with the real
// rank 0.
TEST_F(GroupTest, AStrangerCannotTakeARanksPlace) {
  Listen(2);
  auto one = std::async(std::launch::async, [&] {
    return Group::Connect(std::move(listeners_[1]), UniqueId{7}, 1, addresses_,
                          Clock::now() + seconds(5), TrustList{true, {"127.0.0.1"}, "list"});
  });
  std::vector<UniqueFd> strangers;
  strangers.push_back(FakeRank(addresses_[1], UniqueId{7}, 0, 1, 2, Raw{.proof_key = UniqueId{8}}));
  strangers.push_back(FakeRank(addresses_[1], UniqueId{7}, 0, 1, 2, Raw{.reflect = true}));
  strangers.push_back(FakeRank(addresses_[1], UniqueId{7}, 0, 1, 2,
                               Raw{.source = "127.0.0.2", .hello_only = true}));
  auto zero = Group::Connect(std::move(listeners_[0]), UniqueId{7}, 0, addresses_,
                             Clock::now() + seconds(5));
  ASSERT_TRUE(zero.ok()) << zero.status().message();
  auto g1 = one.get();
  ASSERT_TRUE(g1.ok()) << g1.status().message();
  for (const UniqueFd &s : strangers) {
    EXPECT_TRUE(Ends(s.get()));
  }
  const auto deadline = Clock::now() + seconds(5);
  ASSERT_TRUE((*zero)->Send(1, 1, Bytes("real"), deadline).ok());
  auto got = (*g1)->Recv(0, 1, deadline);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(Text(*got), "real");
}

// Issue 27: connections that send nothing, or part of a handshake, and stay open held up rank 1
// (it read handshakes one at a time, 2 s each: rank 0 waited 8 s for its answer here). Now rank 0
// is answered within less than one such connection's 2 s.
TEST_F(GroupTest, SilentConnectionsDoNotHoldUpTheRealRanks) {
  Listen(2);
  std::vector<UniqueFd> silent;
  for (int i = 0; i < 3; ++i) {
    silent.push_back(Dial(addresses_[1]));
  }
  silent.push_back(Dial(addresses_[1]));
  SendRaw(silent.back().get(), std::string(10, 'H'));  // a third of a handshake
  std::this_thread::sleep_for(milliseconds(200));      // rank 1 has them before rank 0 comes
  for (auto &g : ConnectRanks({0, 1}, {milliseconds(1500), milliseconds(10000)})) {
    ASSERT_TRUE(g.ok()) << g.status().message();
  }
}

// More connections wait silently than a rank serves at once (128): it drops the oldest, and the
// real rank 0, which comes last, still connects, within less than one connection's 2 s.
TEST_F(GroupTest, AFloodOfSilentConnectionsDoesNotKeepARankOut) {
  Listen(2);
  std::vector<UniqueFd> flood;
  for (int i = 0; i < 160; ++i) {
    flood.push_back(Dial(addresses_[1]));
  }
  auto made = ConnectRanks({0, 1}, {milliseconds(1500), milliseconds(10000)});
  for (auto &g : made) {
    ASSERT_TRUE(g.ok()) << g.status().message();
  }
  EXPECT_TRUE(Ends(flood[0].get()));
  const auto deadline = Clock::now() + seconds(5);
  ASSERT_TRUE((*made[0])->Send(1, 1, Bytes("through"), deadline).ok());
  auto got = (*made[1])->Recv(0, 1, deadline);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(Text(*got), "through");
}

// Issue 27: Group queued every frame of any space and tag, without bound. A peer that floods
// messages nobody receives (each of another tag) fails its own connection once it is 32 MiB
// ahead, with an error that says so: it cannot push much more than that (and what sockets hold)
// into this process. The other connections work on.
TEST_F(GroupTest, AFloodOfUnreceivedMessagesFailsTheFloodersConnection) {
  std::vector<UniqueFd> fake;
  auto groups = WithFakeRankZero(3, &fake);
  ASSERT_EQ(groups.size(), 3U);
  const auto deadline = Clock::now() + seconds(20);
  SendRaw(fake[2].get(), Frame(0, 7, 6, "before"));
  auto before = groups[2]->Recv(0, 7, deadline);
  ASSERT_TRUE(before.ok()) << before.status().message();
  EXPECT_EQ(Text(*before), "before");
  constexpr size_t kFlood = 256U << 20;
  auto flood = std::async(std::launch::async, [&] {
    const timeval wait{.tv_sec = 10, .tv_usec = 0};
    EXPECT_EQ(setsockopt(fake[2].get(), SOL_SOCKET, SO_SNDTIMEO, &wait, sizeof(wait)), 0);
    size_t sent = 0;
    for (uint32_t tag = 1000; sent < kFlood; ++tag) {
      const std::string frame = Frame(0, tag, 65536, std::string(65536, 'f'));
      const ssize_t n = send(fake[2].get(), frame.data(), frame.size(), MSG_NOSIGNAL);
      if (n <= 0) {
        break;
      }
      sent += static_cast<size_t>(n);
    }
    return sent;
  });
  auto never = groups[2]->Recv(0, 8, Clock::now() + seconds(10));
  const size_t sent = flood.get();
  RecordProperty("flooder_sent_bytes", std::to_string(sent));
  EXPECT_LT(sent, 96U << 20) << "the flooder was not stopped";
  ASSERT_FALSE(never.ok());
  EXPECT_EQ(never.status().code(), HCCL_E_TCP_TRANSFER);
  EXPECT_THAT(never.status().message(),
              StartsWith("rank 0 (" + addresses_[0] +
                         ") sent more than 32 MiB of messages that no receive took"));
  EXPECT_EQ(groups[2]->Broken(0), never.status().message());
  EXPECT_EQ(groups[2]->Send(0, 1, Bytes("x"), deadline).code(), HCCL_E_TCP_TRANSFER);
  // Ranks 1 and 2 still gather, and rank 1's connection to rank 0 works.
  const std::vector<uint32_t> members{1, 2};
  auto gather1 = std::async(std::launch::async, [&] {
    return groups[1]->AllGather(members, 5, Bytes("one"), deadline, "after the flood");
  });
  auto gather2 = groups[2]->AllGather(members, 5, Bytes("two"), deadline, "after the flood");
  ASSERT_TRUE(gather2.ok()) << gather2.status().message();
  ASSERT_TRUE(gather1.get().ok());
  EXPECT_EQ(Text((*gather2)[0]), "one");
  SendRaw(fake[1].get(), Frame(0, 3, 10, "still here"));
  auto here = groups[1]->Recv(0, 3, deadline);
  ASSERT_TRUE(here.ok()) << here.status().message();
  EXPECT_EQ(Text(*here), "still here");
}

// 256 unreceived messages of one space and tag are kept; the 257th fails the connection, and the
// sender sees it end.
TEST_F(GroupTest, TooManyUnreceivedMessagesOfOneTagFailTheConnection) {
  std::vector<UniqueFd> fake;
  auto groups = WithFakeRankZero(2, &fake);
  ASSERT_EQ(groups.size(), 2U);
  const auto deadline = Clock::now() + seconds(5);
  std::string frames;
  for (int i = 0; i < 256; ++i) {
    frames += Frame(5, 99, 0, "");
  }
  SendRaw(fake[1].get(), frames + Frame(0, 1, 2, "ok"));
  auto ok = groups[1]->Recv(0, 1, deadline);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(Text(*ok), "ok");
  SendRaw(fake[1].get(), Frame(5, 99, 0, ""));
  auto next = groups[1]->Recv(0, 1, deadline);
  ASSERT_FALSE(next.ok());
  EXPECT_EQ(next.status().code(), HCCL_E_TCP_TRANSFER);
  EXPECT_THAT(next.status().message(),
              HasSubstr("sent more than 256 messages of tag 99 (space 0x5) that no receive took"));
  EXPECT_TRUE(Ends(fake[1].get()));
}

// A message longer than 1 MiB (the header of another protocol, say) fails the connection at its
// header, and the sender sees it end.
TEST_F(GroupTest, AMessageLongerThanOneMiBFailsTheConnection) {
  std::vector<UniqueFd> fake;
  auto groups = WithFakeRankZero(2, &fake);
  ASSERT_EQ(groups.size(), 2U);
  SendRaw(fake[1].get(), Frame(0, 1, (1U << 20) + 1, "abc"));
  auto r = groups[1]->Recv(0, 1, Clock::now() + seconds(5));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), HCCL_E_TCP_TRANSFER);
  EXPECT_THAT(r.status().message(),
              StartsWith("rank 0 (" + addresses_[0] +
                         ") sent a message of 1048577 bytes, more than 1 MiB"));
  EXPECT_TRUE(Ends(fake[1].get()));
}

// A message cut off by the end of its connection is not received; the error says so.
TEST_F(GroupTest, AMessageCutOffByTheEndIsNotReceived) {
  std::vector<UniqueFd> fake;
  auto groups = WithFakeRankZero(2, &fake);
  ASSERT_EQ(groups.size(), 2U);
  SendRaw(fake[1].get(), Frame(0, 1, 100, std::string(10, 'x')));
  fake[1].reset();
  auto r = groups[1]->Recv(0, 1, Clock::now() + seconds(5));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), HCCL_E_REMOTE);
  EXPECT_EQ(r.status().message(), "rank 0 (" + addresses_[0] +
                                      ") closed the connection in the middle of a message (26 "
                                      "bytes of it arrived)");
}

// Connections are made when first needed: a rank that listens but never serves its group (it
// hangs before Connect) times out the first call that needs it, naming it; the others work.
TEST_F(GroupTest, TimeoutNamesTheMissingRank) {
  Listen(4);  // rank 3 listens but never connects
  auto made = ConnectRanks({0, 1, 2}, milliseconds(1000));
  std::vector<std::future<Status>> gathers;
  for (uint32_t r = 0; r < 3; ++r) {
    ASSERT_TRUE(made[r].ok()) << "rank " << r << ": " << made[r].status().message();
    gathers.push_back(std::async(std::launch::async, [&, r]() -> Status {
      const std::vector<uint32_t> members{0, 1, 2, 3};
      return (*made[r])
          ->AllGather(members, 1, Bytes("x"), Clock::now() + milliseconds(1000), "gather")
          .status();
    }));
  }
  for (uint32_t r = 0; r < 3; ++r) {
    const Status st = gathers[r].get();
    EXPECT_EQ(st.code(), HCCL_E_TIMEOUT) << st.message();
    EXPECT_THAT(st.message(), HasSubstr("rank 3 (" + addresses_[3] + ")"));
  }
  const std::vector<uint32_t> three{0, 1, 2};
  std::vector<std::future<bool>> ok;
  for (uint32_t r = 0; r < 3; ++r) {
    ok.push_back(std::async(std::launch::async, [&, r] {
      return (*made[r])->AllGather(three, 2, Bytes("y"), Clock::now() + seconds(5), "g").ok();
    }));
  }
  for (auto &o : ok) {
    EXPECT_TRUE(o.get());
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
  ASSERT_TRUE(refused.ok()) << refused.status().message();  // connections come when needed
  const Status st = (*refused)->Send(1, 1, Bytes("x"), Clock::now() + seconds(5));
  EXPECT_EQ(st.code(), HCCL_E_REMOTE);
  EXPECT_EQ(st.message(), "rank 1 (" + gone +
                              ") is gone: it refuses connections (its communicator was destroyed "
                              "or its process ended)");
}

}  // namespace
}  // namespace hzc::bootstrap
