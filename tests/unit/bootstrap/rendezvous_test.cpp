// SPDX-License-Identifier: Apache-2.0
// The TCP rendezvous on loopback, with ranks as threads.
#include "bootstrap/rendezvous.h"

#include <arpa/inet.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include <cstring>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>
#include <vector>

#include "base/unique_fd.h"
#include "bootstrap/socket_io.h"
#include "forked_child.h"
#include "hzc_test.h"

namespace hzc::bootstrap {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;
using json = nlohmann::json;

// The listener address rank @r says it has.
std::string Address(uint32_t r) {
  return "10.0.0." + std::to_string(r) + ":" + std::to_string(40000 + r);
}

// A connection to @root, as any host on the network can make; invalid (with a failure) if none.
UniqueFd Dial(const RootInfo &root) {
  UniqueFd fd(socket(root.addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const timeval wait{.tv_sec = 5, .tv_usec = 0};  // for the answers read below
  if (setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait)) != 0 ||
      connect(fd.get(), reinterpret_cast<const sockaddr *>(&root.addr), AddrLen(root.addr)) != 0) {
    ADD_FAILURE() << "cannot connect to the root: " << strerror(errno);
    return UniqueFd();
  }
  return fd;
}

void SendRaw(int fd, const std::string &bytes) {
  EXPECT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
}

// @body as a message of the rendezvous: its length (4 bytes, big-endian), then itself.
std::string Framed(const std::string &body) {
  const uint32_t len = htonl(static_cast<uint32_t>(body.size()));
  return std::string(reinterpret_cast<const char *>(&len), sizeof(len)) + body;
}

// The message that came on @fd within 5 s (its JSON), or null when the connection ended first.
json Answer(int fd) {
  uint32_t len = 0;
  if (recv(fd, &len, sizeof(len), MSG_WAITALL) != static_cast<ssize_t>(sizeof(len))) {
    return nullptr;
  }
  std::string body(ntohl(len), '\0');
  if (recv(fd, body.data(), body.size(), MSG_WAITALL) != static_cast<ssize_t>(body.size())) {
    return nullptr;
  }
  return json::parse(body, nullptr, false);
}

// Whether the other end closed @fd (within 5 s) without sending anything.
bool EndsSilently(int fd) {
  char c = 0;
  return recv(fd, &c, 1, 0) == 0;
}

class RendezvousTest : public test::Test {
 protected:
  void TearDown() override {
    // The root thread closes its sockets right after answering; give it a moment.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    test::Test::TearDown();
  }

  std::vector<Expected<std::vector<RankIdentity>>> RunRanks(const RootInfo &root, uint32_t nranks,
                                                            std::vector<uint32_t> ranks,
                                                            seconds timeout,
                                                            bool shared_port = false) {
    std::vector<std::future<Expected<std::vector<RankIdentity>>>> futures;
    for (uint32_t r : ranks) {
      futures.push_back(std::async(std::launch::async, [=] {
        return Join(root, nranks, r,
                    RankIdentity{"host-" + std::to_string(r % 2), 1000 + r, Address(r)}, timeout,
                    shared_port);
      }));
    }
    std::vector<Expected<std::vector<RankIdentity>>> out;
    for (auto &f : futures) {
      out.push_back(f.get());
    }
    return out;
  }
};

TEST_F(RendezvousTest, EightRanksExchangeIdentities) {
  auto root = StartRoot("127.0.0.1", seconds(10));
  ASSERT_TRUE(root.ok()) << root.status().message();
  auto results = RunRanks(*root, 8, {7, 3, 0, 5, 1, 6, 2, 4}, seconds(10));
  for (auto &r : results) {
    ASSERT_TRUE(r.ok()) << r.status().message();
    ASSERT_EQ(r->size(), 8U);
    for (uint32_t i = 0; i < 8; ++i) {
      EXPECT_EQ((*r)[i].host, "host-" + std::to_string(i % 2));
      EXPECT_EQ((*r)[i].pid, 1000 + i);
      EXPECT_EQ((*r)[i].address, Address(i));
    }
  }
}

// The process serving the rendezvous is rank 0 and exits the moment its Join returns (a
// program that only initialises): the other ranks still get the table. The root thread sends
// the table in rank order, so rank 0 has it first; without waiting for the thread, rank 0's
// process ends while the table is on its way to the others and they fail with
// HCCL_E_TCP_TRANSFER. With 64 ranks the thread still has 63 tables to send when rank 0
// returns: without the wait about nine rounds in ten failed here, so eight rounds do not pass.
TEST_F(RendezvousTest, RootProcessExitingRightAfterJoinLeavesNoRankWithoutTheTable) {
  constexpr uint32_t kRanks = 64;
  constexpr int kRounds = 8;
  void *shared =
      mmap(nullptr, sizeof(RootInfo), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(shared, MAP_FAILED);
  for (int round = 0; round < kRounds; ++round) {
    test::ForkedChild root_process([&](test::ForkedChild::Pipes pipes) {
      auto root = StartRoot("127.0.0.1", seconds(5));
      if (!root.ok()) {
        return 1;
      }
      std::memcpy(shared, &*root, sizeof(RootInfo));
      if (!test::ForkedChild::Write(pipes.out, 1)) {
        return 2;
      }
      return Join(*root, kRanks, 0, RankIdentity{"host-0", 1000, ""}, seconds(5)).ok() ? 0 : 3;
    });
    uint64_t word = 0;
    ASSERT_TRUE(root_process.Receive(&word));
    RootInfo root;
    std::memcpy(&root, shared, sizeof(RootInfo));
    std::vector<uint32_t> others;
    for (uint32_t r = 1; r < kRanks; ++r) {
      others.push_back(r);
    }
    for (auto &r : RunRanks(root, kRanks, others, seconds(5))) {
      EXPECT_TRUE(r.ok()) << "round " << round << ": " << r.status().message();
    }
    EXPECT_EQ(root_process.Wait(), 0) << "round " << round;
    if (HasFailure()) {
      break;
    }
  }
  munmap(shared, sizeof(RootInfo));
}

// A rank that joined and then vanished before the table reached it: the root's own Join,
// in the process serving the rendezvous, says so rather than succeed alone.
TEST_F(RendezvousTest, RootRankFailsWhenTheTableDidNotReachARank) {
  ExpectErrorLog("bootstrap: root");
  auto root = StartRoot("127.0.0.1", seconds(5));
  ASSERT_TRUE(root.ok()) << root.status().message();
  UniqueFd gone(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_EQ(
      connect(gone.get(), reinterpret_cast<const sockaddr *>(&root->addr), sizeof(sockaddr_in)), 0);
  const std::string hello =
      R"({"uid":")" + IdString(root->id) + R"(","nranks":2,"rank":1,"host":"h","pid":2})";
  const uint32_t len = htonl(static_cast<uint32_t>(hello.size()));
  ASSERT_EQ(send(gone.get(), &len, sizeof(len), 0), static_cast<ssize_t>(sizeof(len)));
  ASSERT_EQ(send(gone.get(), hello.data(), hello.size(), 0), static_cast<ssize_t>(hello.size()));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the root reads the hello
  const linger reset{.l_onoff = 1, .l_linger = 0};              // close with a reset
  ASSERT_EQ(setsockopt(gone.get(), SOL_SOCKET, SO_LINGER, &reset, sizeof(reset)), 0);
  gone.reset();
  auto r = Join(*root, 2, 0, RankIdentity{"h", 1, ""}, seconds(5));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), HCCL_E_TCP_TRANSFER);
  EXPECT_THAT(r.status().message(), HasSubstr("rank(s) 1 of 2 did not get the rank table"));
}

TEST_F(RendezvousTest, SingleRank) {
  auto root = StartRoot("127.0.0.1", seconds(5));
  ASSERT_TRUE(root.ok());
  auto results = RunRanks(*root, 1, {0}, seconds(5));
  ASSERT_TRUE(results[0].ok()) << results[0].status().message();
  EXPECT_EQ(results[0]->size(), 1U);
}

TEST_F(RendezvousTest, MissingRankTimesOutNamingIt) {
  ExpectErrorLog("bootstrap: root");
  auto root = StartRoot("127.0.0.1", seconds(1));
  ASSERT_TRUE(root.ok());
  auto results = RunRanks(*root, 4, {0, 1, 3}, seconds(1));
  for (auto &r : results) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), HCCL_E_TIMEOUT);
    EXPECT_THAT(r.status().message(), HasSubstr("rank(s) 2 of 4 did not arrive"));
  }
}

TEST_F(RendezvousTest, MismatchedRankCountIsParaError) {
  ExpectErrorLog("bootstrap: root");
  auto root = StartRoot("127.0.0.1", seconds(1));
  ASSERT_TRUE(root.ok());
  auto first = std::async(std::launch::async, [&] {
    return Join(*root, 2, 0, RankIdentity{"h", 1, ""}, seconds(1));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto late = Join(*root, 3, 1, RankIdentity{"h", 2, ""}, seconds(1));
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), HCCL_E_PARA);
  EXPECT_THAT(late.status().message(), HasSubstr("nRanks=3 differs from nRanks=2"));
  // The refused rank does not count: the first one times out waiting for rank 1.
  auto r = first.get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), HCCL_E_TIMEOUT);
  EXPECT_THAT(r.status().message(), HasSubstr("rank(s) 1 of 2"));
}

TEST_F(RendezvousTest, DuplicateRankIsParaError) {
  auto root = StartRoot("127.0.0.1", seconds(5));
  ASSERT_TRUE(root.ok());
  auto first = std::async(std::launch::async, [&] {
    return Join(*root, 2, 0, RankIdentity{"h", 1, ""}, seconds(5));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto dup = Join(*root, 2, 0, RankIdentity{"h", 2, ""}, seconds(5));
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.status().code(), HCCL_E_PARA);
  EXPECT_THAT(dup.status().message(), HasSubstr("rank=0 is out of range or already joined"));
  auto second = Join(*root, 2, 1, RankIdentity{"h", 3, ""}, seconds(5));
  EXPECT_TRUE(second.ok()) << second.status().message();
  EXPECT_TRUE(first.get().ok());
}

TEST_F(RendezvousTest, UnreachableRootIsTcpConnectError) {
  auto root = StartRoot("127.0.0.1", seconds(1));
  ASSERT_TRUE(root.ok());
  RootInfo wrong = *root;
  reinterpret_cast<sockaddr_in *>(&wrong.addr)->sin_port = htons(1);  // nobody listens
  auto r = Join(wrong, 1, 0, RankIdentity{"h", 1, ""}, seconds(0));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), HCCL_E_TCP_CONNECT);
  EXPECT_THAT(r.status().message(), HasSubstr("127.0.0.1:1"));
  // Let the real root serve its rank so its thread ends.
  EXPECT_TRUE(Join(*root, 1, 0, RankIdentity{"h", 1, ""}, seconds(2)).ok());
}

// Two rendezvous (two rank tables' communicators) on one fixed port at once: the second root
// waits for the port; its ranks, refused by the first root as another communicator's, retry.
TEST_F(RendezvousTest, TwoRendezvousShareAFixedPort) {
  sockaddr_storage any{};
  ASSERT_TRUE(ParseAddress("127.0.0.1").ok());
  any = *ParseAddress("127.0.0.1");
  sockaddr_storage bound{};
  {
    auto probe = ListenOn(any, true, &bound);  // a free port, released again
    ASSERT_TRUE(probe.ok()) << probe.status().message();
  }
  const uint16_t port = ntohs(reinterpret_cast<sockaddr_in *>(&bound)->sin_port);
  const UniqueId a{1}, b{2};
  auto root_a = StartRootAt("127.0.0.1", port, a, seconds(10));
  ASSERT_TRUE(root_a.ok()) << root_a.status().message();
  EXPECT_EQ(root_a->AddressString(), "127.0.0.1:" + std::to_string(port));
  auto root_b = std::async(std::launch::async,
                           [&] { return StartRootAt("127.0.0.1", port, b, seconds(10)); });
  RootInfo info_b = *root_a;
  info_b.id = b;
  auto ranks_b = std::async(std::launch::async, [&] {
    return RunRanks(info_b, 2, {0, 1}, seconds(10), true);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // b's ranks reach a's root
  for (auto &r : RunRanks(*root_a, 2, {0, 1}, seconds(10), true)) {
    ASSERT_TRUE(r.ok()) << r.status().message();
  }
  auto started_b = root_b.get();
  ASSERT_TRUE(started_b.ok()) << started_b.status().message();
  for (auto &r : ranks_b.get()) {
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->size(), 2U);
  }
}

// Issue 27: a hello whose fields are of the wrong JSON type (the 13 bytes {"uid":1} made the
// root thread throw and close its port, failing every rank) costs only its connection: the
// root answers it with the reason, and the real ranks still form the communicator.
TEST_F(RendezvousTest, HellosOfWrongTypesCostOnlyTheirConnection) {
  auto root = StartRoot("127.0.0.1", seconds(5));
  ASSERT_TRUE(root.ok()) << root.status().message();
  const std::string uid = R"({"uid":")" + IdString(root->id) + R"(",)";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"({"uid":1})", R"("uid" is a number, not a string)"},
      {uid + R"("nranks":"2","rank":0})", R"("nranks" is a string, not an integer)"},
      {uid + R"("nranks":2,"rank":-1})", R"("rank" is -1, not in [0, 4294967295])"},
      {uid + R"("nranks":2,"rank":0.5})", R"("rank" is a number, not an integer)"},
      {uid + R"("nranks":2,"rank":0,"host":7})", R"("host" is a number, not a string)"},
      {uid + R"("nranks":2,"rank":0,"pid":"1"})", R"("pid" is a string, not an integer)"},
      {uid + R"("nranks":2,"rank":0,"address":[1]})", R"("address" is an array, not a string)"},
      {uid + R"("nranks":0,"rank":0})", R"("nranks" is 0, not in [1, 4294967295])"},
      {uid + R"("nranks":4294967296,"rank":0})", R"("nranks" is 4294967296, not in)"},
      {uid + R"("rank":0})", R"(no "nranks")"},
      {uid + R"("nranks":2,"rank":0,"host":")" + std::string(2000, 'h') + R"("})",
       R"("host" has 2000 bytes, more than 1024)"},
      {R"([1,2])", "a JSON array, not an object"},
      {R"("text")", "a JSON string, not an object"},
      {R"({"uid":)", "not JSON"},
  };
  std::vector<UniqueFd> conns;
  for (const auto &[hello, why] : bad) {
    conns.push_back(Dial(*root));
    SendRaw(conns.back().get(), Framed(hello));
  }
  for (size_t i = 0; i < bad.size(); ++i) {
    const json answer = Answer(conns[i].get());
    ASSERT_TRUE(answer.is_object()) << bad[i].first;
    EXPECT_EQ(answer.value("code", -1), HCCL_E_PARA) << bad[i].first;
    EXPECT_THAT(answer.value("error", ""), HasSubstr("malformed hello: " + bad[i].second));
    EXPECT_TRUE(EndsSilently(conns[i].get())) << bad[i].first;
  }
  for (auto &r : RunRanks(*root, 2, {0, 1}, seconds(5))) {
    ASSERT_TRUE(r.ok()) << r.status().message();
    ASSERT_EQ(r->size(), 2U);
    EXPECT_EQ((*r)[1].address, Address(1));
  }
}

// Issue 27: connections that send nothing, or part of a hello, and stay open made set-up fail (the
// root read hellos one at a time, 5 s each). They no longer hold up the real ranks: these join
// with a timeout shorter than one connection's 5 s.
TEST_F(RendezvousTest, SilentConnectionsDoNotHoldUpTheRanks) {
  auto root = StartRoot("127.0.0.1", seconds(2));
  ASSERT_TRUE(root.ok()) << root.status().message();
  std::vector<UniqueFd> silent;
  for (int i = 0; i < 3; ++i) {
    silent.push_back(Dial(*root));
  }
  silent.push_back(Dial(*root));
  SendRaw(silent.back().get(), std::string(2, '\0'));  // half a length word
  silent.push_back(Dial(*root));
  SendRaw(silent.back().get(), Framed(std::string(100, ' ')).substr(0, 50));  // half a hello
  std::this_thread::sleep_for(milliseconds(200));  // the root has them all before the ranks
  const auto start = std::chrono::steady_clock::now();
  for (auto &r : RunRanks(*root, 2, {0, 1}, seconds(2))) {
    ASSERT_TRUE(r.ok()) << r.status().message();
  }
  const auto took = std::chrono::steady_clock::now() - start;
  RecordProperty("setup_ms",
                 static_cast<int>(std::chrono::duration_cast<milliseconds>(took).count()));
}

// More connections wait silently than the root serves at once (128): it drops the oldest,
// telling each to connect again, and the real ranks, which come last, still join.
TEST_F(RendezvousTest, AFloodOfSilentConnectionsDoesNotKeepTheRanksOut) {
  auto root = StartRoot("127.0.0.1", seconds(5));
  ASSERT_TRUE(root.ok()) << root.status().message();
  std::vector<UniqueFd> flood;
  for (int i = 0; i < 160; ++i) {
    flood.push_back(Dial(*root));
  }
  const json first = Answer(flood[0].get());
  ASSERT_TRUE(first.is_object());
  EXPECT_EQ(first.value("retry", false), true);
  EXPECT_THAT(first.value("error", ""), HasSubstr("more than 128 connections waited"));
  for (auto &r : RunRanks(*root, 2, {0, 1}, seconds(5))) {
    ASSERT_TRUE(r.ok()) << r.status().message();
  }
}

// Hellos of impossible lengths (none, 4 GiB, more than 64 KiB) are dropped at their length word,
// a hello cut off by the end of its connection when that ends; the real ranks join.
TEST_F(RendezvousTest, OversizedAndTruncatedHellosAreDropped) {
  auto root = StartRoot("127.0.0.1", seconds(2));
  ASSERT_TRUE(root.ok()) << root.status().message();
  std::vector<UniqueFd> bad;
  for (uint32_t len : {0U, 0xffffffffU, (64U << 10) + 1}) {
    bad.push_back(Dial(*root));
    const uint32_t word = htonl(len);
    SendRaw(bad.back().get(), std::string(reinterpret_cast<const char *>(&word), sizeof(word)));
  }
  bad.push_back(Dial(*root));
  const std::string hello =
      Framed(R"({"uid":")" + IdString(root->id) + R"(","nranks":2,"rank":1,"host":"h","pid":2})");
  SendRaw(bad.back().get(), hello.substr(0, hello.size() - 5));
  ASSERT_EQ(shutdown(bad.back().get(), SHUT_WR), 0);
  for (const UniqueFd &fd : bad) {
    EXPECT_TRUE(EndsSilently(fd.get()));
  }
  for (auto &r : RunRanks(*root, 2, {0, 1}, seconds(2))) {
    ASSERT_TRUE(r.ok()) << r.status().message();
  }
}

// A host that answers in the root's place is as untrusted as one that sends hellos: an answer of
// the wrong shape is HCCL_E_TCP_TRANSFER naming what is wrong (it made Join throw); an answer
// asking the rank to connect again (a root in a flood of connections) is followed.
TEST_F(RendezvousTest, AnswersOfTheRootAreCheckedAndRetryIsFollowed) {
  sockaddr_storage bound{};
  auto listener = ListenOn(*ParseAddress("127.0.0.1"), false, &bound);
  ASSERT_TRUE(listener.ok()) << listener.status().message();
  RootInfo fake;
  fake.addr = bound;
  fake.id = UniqueId{5};
  // Join rank 0 of 1 at a root that answers its successive connections with @answers.
  const auto join = [&](const std::vector<std::string> &answers) {
    auto server = std::async(std::launch::async, [&] {
      for (const std::string &a : answers) {
        UniqueFd conn(accept4(listener->get(), nullptr, nullptr, SOCK_CLOEXEC));
        (void)Answer(conn.get());  // the hello
        SendRaw(conn.get(), Framed(a));
      }
    });
    auto r = Join(fake, 1, 0, RankIdentity{"h", 1, ""}, seconds(2));
    server.get();
    return r;
  };
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"({"code":"0"})", R"(malformed answer: "code" is a string, not an integer)"},
      {R"({"code":99999})", R"(malformed answer: "code" is 99999, not in [0, 1041])"},
      {R"({"code":9,"error":5})", R"(malformed answer: "error" is a number, not a string)"},
      {R"({"code":9,"retry":"yes"})", R"(malformed answer: "retry" is a string, not a boolean)"},
      {R"({"code":0})", R"(malformed rank table: no "ranks")"},
      {R"({"code":0,"ranks":{"host":"h"}})", R"(malformed rank table: "ranks" is an object)"},
      {R"({"code":0,"ranks":[]})", "malformed rank table: 0 ranks"},
      {R"({"code":0,"ranks":[7]})", "malformed rank table: a number for a rank"},
      {R"({"code":0,"ranks":[{"host":1}]})", R"(malformed rank table: rank 0: "host" is a number)"},
  };
  for (const auto &[answer, why] : bad) {
    auto r = join({answer});
    ASSERT_FALSE(r.ok()) << answer;
    EXPECT_EQ(r.status().code(), HCCL_E_TCP_TRANSFER) << answer;
    EXPECT_THAT(r.status().message(), HasSubstr(why));
  }
  auto again = join({R"({"code":11,"error":"busy","retry":true})",
                     R"({"code":0,"ranks":[{"host":"h","pid":3,"address":"","later":[]}]})"});
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ((*again)[0].pid, 3U);
}

TEST_F(RendezvousTest, BadAddress) {
  auto root = StartRoot("not-an-ip", seconds(1));
  ASSERT_FALSE(root.ok());
  EXPECT_EQ(root.status().code(), HCCL_E_PARA);
}

}  // namespace
}  // namespace hzc::bootstrap
