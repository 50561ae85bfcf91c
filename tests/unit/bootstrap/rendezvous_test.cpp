// SPDX-License-Identifier: Apache-2.0
// The TCP rendezvous on loopback, with ranks as threads.
#include "bootstrap/rendezvous.h"

#include <arpa/inet.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include <cstring>
#include <future>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include "base/unique_fd.h"
#include "bootstrap/rank_table.h"
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

// The start of a hello of version 2 for communicator @key with a zero nonce: its fields up to
// "nranks", with a comma.
std::string HelloHead(const UniqueId &key) {
  return R"({"hzc":2,"tag":")" + PublicId(key) + R"(","nonce":")" + std::string(32, '0') + R"(",)";
}

// How a raw rank proves itself.
struct Raw {
  std::optional<UniqueId> proof_key{};  // nullopt: the key its hello names
  std::string source{};                 // the address it connects from; empty: the kernel's choice
  bool reflect = false;                 // it sends back the root's own proof as its proof
};

// A raw connection to @root that names communicator @key in its hello, says it is rank @rank of
// @nranks and proves as @how says. *@challenge: the root's first answer. Invalid (with a failure)
// if it cannot connect.
UniqueFd RawRank(const RootInfo &root, const UniqueId &key, uint32_t nranks, uint32_t rank,
                 json *challenge, const Raw &how = {}) {
  const std::string &source = how.source;
  UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const timeval wait{.tv_sec = 5, .tv_usec = 0};
  EXPECT_EQ(setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait)), 0);
  if (!source.empty()) {
    const sockaddr_storage from = *ParseAddress(source);
    EXPECT_EQ(bind(fd.get(), reinterpret_cast<const sockaddr *>(&from), AddrLen(from)), 0);
  }
  if (connect(fd.get(), reinterpret_cast<const sockaddr *>(&root.addr), AddrLen(root.addr)) != 0) {
    ADD_FAILURE() << "cannot connect to the root: " << strerror(errno);
    return UniqueFd();
  }
  const Nonce nonce = *RandomNonce();
  const std::string body =
      json{{"hzc", 2},     {"tag", PublicId(key)}, {"nonce", Hex(nonce)}, {"nranks", nranks},
           {"rank", rank}, {"host", "stranger"},   {"pid", 666},          {"address", ""}}
          .dump();
  SendRaw(fd.get(), Framed(body));
  *challenge = Answer(fd.get());
  if (!challenge->is_object() || !challenge->contains("proof")) {
    return fd;
  }
  const std::string theirs = *Unhex(challenge->value("nonce", ""), sizeof(Nonce));
  const auto bytes = [](const std::string &t) {
    return std::span(reinterpret_cast<const uint8_t *>(t.data()), t.size());
  };
  const Mac proof = Prove(how.proof_key.value_or(key), "hzc-rendezvous-rank",
                          {nonce, bytes(theirs), bytes(body)});
  const std::string sent = how.reflect ? challenge->value("proof", "") : Hex(proof);
  SendRaw(fd.get(), Framed(json{{"proof", sent}}.dump()));
  return fd;
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
  json challenge;
  UniqueFd gone = RawRank(*root, root->id, 2, 1, &challenge);
  ASSERT_TRUE(challenge.contains("proof")) << challenge.dump();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the root reads the proof
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

// The root's answer holds at most 1 KiB of error text: with hundreds of ranks missing it names
// the first of them and how many (the whole list overflowed the field and the ranks read the
// answer as malformed).
TEST_F(RendezvousTest, ManyMissingRanksFitTheAnswer) {
  ExpectErrorLog("bootstrap: root");
  auto root = StartRoot("127.0.0.1", seconds(1));
  ASSERT_TRUE(root.ok());
  auto results = RunRanks(*root, 1024, {0}, seconds(1));
  ASSERT_EQ(results.size(), 1U);
  ASSERT_FALSE(results[0].ok());
  EXPECT_EQ(results[0].status().code(), HCCL_E_TIMEOUT);
  EXPECT_THAT(results[0].status().message(), HasSubstr("rank(s) 1,2,3,"));
  EXPECT_THAT(results[0].status().message(),
              HasSubstr(",... (1023 in all) of 1024 did not arrive"));
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
  const std::string uid = HelloHead(root->id);
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"({"hzc":2,"tag":1})", R"("tag" is a number, not a string)"},
      {R"({"uid":")" + IdString(root->id) + R"(","nranks":2,"rank":0})", R"(no "hzc")"},
      {R"({"hzc":"2"})", R"("hzc" is a string, not an integer)"},
      {R"({"hzc":2,"tag":"x","nonce":"00"})", R"("nonce" is not 16 bytes of hex)"},
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

// The body of the message that came on @fd within 5 s; empty when the connection ended first.
std::string Message(int fd) {
  uint32_t len = 0;
  if (recv(fd, &len, sizeof(len), MSG_WAITALL) != static_cast<ssize_t>(sizeof(len))) {
    return "";
  }
  std::string body(ntohl(len), '\0');
  if (recv(fd, body.data(), body.size(), MSG_WAITALL) != static_cast<ssize_t>(body.size())) {
    return "";
  }
  return body;
}

std::span<const uint8_t> Bytes(const std::string &t) {
  return std::span(reinterpret_cast<const uint8_t *>(t.data()), t.size());
}

// A listener on loopback that plays the root of communicator @id: Join at it, rank 0 of 1, and
// answer its successive connections with @answers. An answer that starts with '!' is sent
// (without it) right after the hello; any other comes after the challenge, whose proof is made
// with @prover.
class FakeRoot {
 public:
  FakeRoot() {
    auto l = ListenOn(*ParseAddress("127.0.0.1"), false, &bound_);
    EXPECT_TRUE(l.ok()) << l.status().message();
    listener_ = std::move(*l);
  }
  Expected<std::vector<RankIdentity>> Join(const std::vector<std::string> &answers,
                                           const UniqueId &id = UniqueId{5},
                                           const UniqueId &prover = UniqueId{5}) {
    RootInfo fake;
    fake.addr = bound_;
    fake.id = id;
    auto server = std::async(std::launch::async, [&] {
      for (const std::string &a : answers) {
        UniqueFd conn(accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
        const timeval wait{.tv_sec = 5, .tv_usec = 0};
        (void)setsockopt(conn.get(), SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait));
        const std::string hello = Message(conn.get());
        if (a.starts_with("!")) {
          SendRaw(conn.get(), Framed(a.substr(1)));
          continue;
        }
        const json h = json::parse(hello, nullptr, false);
        const std::string theirs = *Unhex(h.value("nonce", ""), sizeof(Nonce));
        const Nonce mine = *RandomNonce();
        const Mac proof = Prove(prover, "hzc-rendezvous-root", {Bytes(theirs), mine, Bytes(hello)});
        SendRaw(conn.get(), Framed(json{{"nonce", Hex(mine)}, {"proof", Hex(proof)}}.dump()));
        if (!Message(conn.get()).empty()) {  // the rank's proof
          SendRaw(conn.get(), Framed(a));
        }
      }
    });
    auto r = bootstrap::Join(fake, 1, 0, RankIdentity{"h", 1, ""}, seconds(2));
    server.get();
    return r;
  }

 private:
  sockaddr_storage bound_{};
  UniqueFd listener_;
};

const std::string kSession = std::string(R"("session":")") + std::string(32, 'a') + R"(")";

// A host that answers in the root's place is as untrusted as one that sends hellos: an answer of
// the wrong shape is HCCL_E_TCP_TRANSFER naming what is wrong (it made Join throw); an answer
// asking the rank to connect again (a root in a flood of connections) is followed.
TEST_F(RendezvousTest, AnswersOfTheRootAreCheckedAndRetryIsFollowed) {
  FakeRoot root;
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"(!{"code":"0"})", R"(malformed answer: "code" is a string, not an integer)"},
      {R"(!{"code":99999})", R"(malformed answer: "code" is 99999, not in [0, 1041])"},
      {R"(!{"code":9,"error":5})", R"(malformed answer: "error" is a number, not a string)"},
      {R"(!{"code":9,"retry":"yes"})", R"(malformed answer: "retry" is a string, not a boolean)"},
      {R"(!{"nonce":"00000000000000000000000000000000","proof":7})",
       R"(malformed challenge: "proof" is a number, not a string)"},
      {R"({"code":0})", R"(malformed rank table: no "ranks")"},
      {R"({"code":0,"ranks":{"host":"h"}})", R"(malformed rank table: "ranks" is an object)"},
      {R"({"code":0,"ranks":[]})", "malformed rank table: 0 ranks"},
      {R"({"code":0,"ranks":[7],)" + kSession + "}", "malformed rank table: a number for a rank"},
      {R"({"code":0,"ranks":[{"host":"h"}]})", R"(malformed rank table: no "session")"},
      {R"({"code":0,"ranks":[{"host":1}],)" + kSession + "}",
       R"(malformed rank table: rank 0: "host" is a number)"},
  };
  for (const auto &[answer, why] : bad) {
    auto r = root.Join({answer});
    ASSERT_FALSE(r.ok()) << answer;
    EXPECT_EQ(r.status().code(), HCCL_E_TCP_TRANSFER) << answer;
    EXPECT_THAT(r.status().message(), HasSubstr(why));
  }
  auto again = root.Join(
      {R"(!{"code":11,"error":"busy","retry":true})",
       R"({"code":0,"ranks":[{"host":"h","pid":3,"address":"","later":[]}],)" + kSession + "}"});
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ((*again)[0].pid, 3U);
}

// Issue 27: a local user who binds a rank table's port first could hand every rank a forged
// table. A root that does not prove it holds the communicator's key is refused: one that sends a
// table straight away, one whose proof is of another key, and one that reflects the rank's own
// hello back as its proof.
TEST_F(RendezvousTest, AStrangerRootIsRefused) {
  FakeRoot root;
  const std::string table = R"({"code":0,"ranks":[{"host":"h","pid":3}],)" + kSession + "}";
  for (const auto &r : {root.Join({"!" + table}), root.Join({table}, UniqueId{5}, UniqueId{6})}) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), HCCL_E_TCP_CONNECT);
    EXPECT_THAT(r.status().message(), HasSubstr("stranger holds the root's address"));
  }
  auto reflected = root.Join({R"(!{"nonce":"00000000000000000000000000000000","proof":")" +
                              std::string(64, '0') + R"("})"});
  ASSERT_FALSE(reflected.ok());
  EXPECT_THAT(reflected.status().message(), HasSubstr("does not prove it holds"));
}

// Issue 27: a program that knows where the root listens (and even the communicator's public
// tag) but not its key cannot join: its proof fails, and so does one that reflects the root's
// proof back; each is dropped with the reason and the real ranks form the communicator without
// it. A hello of another key is told the rendezvous is another communicator's.
TEST_F(RendezvousTest, AStrangerRankCannotJoin) {
  auto root = StartRoot("127.0.0.1", seconds(5));
  ASSERT_TRUE(root.ok()) << root.status().message();
  json challenge;
  UniqueFd wrong = RawRank(*root, UniqueId{1, 2, 3}, 2, 1, &challenge);
  EXPECT_EQ(challenge.value("foreign", false), true) << challenge.dump();
  for (const Raw &how : {Raw{.proof_key = UniqueId{1, 2, 3}}, Raw{.reflect = true}}) {
    UniqueFd stranger = RawRank(*root, root->id, 2, 1, &challenge, how);
    ASSERT_TRUE(challenge.contains("proof")) << challenge.dump();
    const json refused = Answer(stranger.get());
    EXPECT_EQ(refused.value("code", -1), HCCL_E_PARA) << refused.dump();
    EXPECT_THAT(refused.value("error", ""),
                HasSubstr("rank 1 not admitted: its proof does not hold"));
  }
  for (auto &r : RunRanks(*root, 2, {0, 1}, seconds(5))) {
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ((*r)[1].pid, 1001U);
  }
}

// Issue 27: a raw-TCP program that knew only a rank table's server list joined as rank 1. The
// root of a rank table takes rank 1 only from its server's address (127.0.0.2 here), and only
// addresses on the trust list when it is on: a stranger elsewhere (127.0.0.3) is refused though
// it holds the table's public key, and the real rank 1, connecting from its address, joins.
TEST_F(RendezvousTest, ARankTableTakesARankOnlyFromItsAddressAndTheTrustList) {
  const UniqueId key{9};
  for (const bool trust : {false, true}) {
    Admission admission;
    admission.check = [](uint32_t rank, const std::string &ip) {
      return ip == (rank == 0 ? "127.0.0.1" : "127.0.0.2") ? "" : "not from its server";
    };
    if (trust) {
      admission.check = nullptr;
      admission.trust = TrustList{true, {"127.0.0.1", "127.0.0.2"}, "list.json"};
    }
    auto root = StartRootAt("127.0.0.1", 0, key, seconds(5), admission);
    ASSERT_TRUE(root.ok()) << root.status().message();
    json refused;
    UniqueFd stranger = RawRank(*root, key, 2, 1, &refused, Raw{.source = "127.0.0.3"});
    EXPECT_EQ(refused.value("code", -1), HCCL_E_PARA) << refused.dump();
    EXPECT_THAT(refused.value("error", ""),
                HasSubstr(trust ? "127.0.0.3 is not on the trust list (HCCL_WHITELIST_FILE "
                                  "list.json)"
                                : "not from its server"));
    RootInfo from2 = *root;
    from2.source = *ParseAddress("127.0.0.2");
    auto one = std::async(std::launch::async, [&] {
      return Join(from2, 2, 1, RankIdentity{"h1", 11, ""}, seconds(5));
    });
    auto zero = Join(*root, 2, 0, RankIdentity{"h0", 10, ""}, seconds(5));
    ASSERT_TRUE(zero.ok()) << zero.status().message();
    ASSERT_TRUE(one.get().ok());
    EXPECT_EQ((*zero)[1].pid, 11U);
  }
}

// Issue 27: the ranks of a rank table with a job secret prove a key derived from it; a rank
// given another secret names another communicator and is not taken.
TEST_F(RendezvousTest, ARankWithAnotherJobSecretIsNotTaken) {
  auto table = ParseRankTable(R"({"version":"1.0","server_count":"1","server_list":[
      {"server_id":"127.0.0.1","device":[{"device_id":"0","device_ip":"1.1.1.1","rank_id":"0"},
      {"device_id":"1","device_ip":"1.1.1.2","rank_id":"1"}]}],"status":"completed"})");
  ASSERT_TRUE(table.ok()) << table.status().message();
  const UniqueId right = RankTableKey(*table, "s3cret"), wrong = RankTableKey(*table, "guess");
  EXPECT_NE(right, wrong);
  EXPECT_NE(right, RankTableKey(*table, std::nullopt));
  EXPECT_EQ(RankTableKey(*table, std::nullopt), RankTableId(*table));
  auto root = StartRootAt("127.0.0.1", 0, right, seconds(2));
  ASSERT_TRUE(root.ok()) << root.status().message();
  RootInfo guessed = *root;
  guessed.id = wrong;
  auto stranger = Join(guessed, 2, 1, RankIdentity{"h", 1, ""}, seconds(1));
  ASSERT_FALSE(stranger.ok());
  EXPECT_EQ(stranger.status().code(), HCCL_E_PARA);
  EXPECT_THAT(stranger.status().message(), HasSubstr("another communicator"));
  UniqueId session_a{}, session_b{};
  auto one = std::async(std::launch::async, [&] {
    return Join(*root, 2, 1, RankIdentity{"h", 1, ""}, seconds(2), false, &session_b);
  });
  ASSERT_TRUE(Join(*root, 2, 0, RankIdentity{"h", 0, ""}, seconds(2), false, &session_a).ok());
  ASSERT_TRUE(one.get().ok());
  EXPECT_EQ(session_a, session_b);
  EXPECT_NE(session_a, UniqueId{});
  EXPECT_NE(session_a, right);
}

TEST_F(RendezvousTest, BadAddress) {
  auto root = StartRoot("not-an-ip", seconds(1));
  ASSERT_FALSE(root.ok());
  EXPECT_EQ(root.status().code(), HCCL_E_PARA);
}

}  // namespace
}  // namespace hzc::bootstrap
