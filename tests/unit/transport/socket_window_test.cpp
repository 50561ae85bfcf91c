// SPDX-License-Identifier: Apache-2.0
// One-sided transfers over TCP (transport/socket_window.h) among three endpoints of this process
// on the loopback: puts and gets into exposed memory, what the service thread refuses (memory not
// exposed to the asker, a stranger's hello, a rank posing as another, a token used twice, silent
// connections), and a withdrawal.
#include "transport/socket_window.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "base/unique_fd.h"
#include "bootstrap/socket_io.h"
#include "hzc_test.h"
#include "stderr_lines.h"

namespace hzc::transport {
namespace {

using Clock = std::chrono::steady_clock;
constexpr const char *kAddress = "127.0.0.1:1";

class SocketWindowTest : public test::Test {
 protected:
  void SetUp() override {
    test::Test::SetUp();
    for (uint32_t r = 0; r < 3; ++r) {
      auto w = SocketWindows::Open(r, 3, kAddress);
      ASSERT_TRUE(w.ok()) << w.status().message();
      w_[r] = std::move(*w);
    }
  }
  void TearDown() override {
    for (auto &w : w_) {
      w.reset();
    }
    test::Test::TearDown();
  }
  // Rank @from connects to rank @to with the card @to made for it.
  Status Link(uint32_t from, uint32_t to) {
    auto card = w_[to]->CardFor(from);
    if (!card.ok()) {
      return card.status();
    }
    return w_[from]->Connect(to, kAddress, *card, Deadline());
  }
  static Clock::time_point Deadline() { return Clock::now() + std::chrono::seconds(10); }
  std::unique_ptr<SocketWindows> w_[3];
};

TEST_F(SocketWindowTest, PutsAndGetsReachTheExposedMemory) {
  std::vector<uint8_t> target(3 << 20, 0), source(3 << 20);
  std::iota(source.begin(), source.end(), uint8_t{7});
  w_[1]->Expose(1, 0, reinterpret_cast<uint64_t>(target.data()), target.size());
  ASSERT_TRUE(Link(0, 1).ok());
  const auto base = reinterpret_cast<uint64_t>(target.data());
  // A batch of pieces, one of them larger than the thread's step, one unaligned.
  const std::vector<SocketWindows::Op> put = {
      {source.data(), base, 100},
      {source.data() + 100, base + 100, (2 << 20) + 3},
      {source.data() + (2 << 20) + 103, base + (2 << 20) + 103, (1 << 20) - 103}};
  ASSERT_TRUE(w_[0]->Execute(1, put, true, Deadline()).ok());
  EXPECT_EQ(target, source);
  std::vector<uint8_t> back(target.size(), 0);
  const std::vector<SocketWindows::Op> get = {{back.data(), base, back.size()}};
  ASSERT_TRUE(w_[0]->Execute(1, get, false, Deadline()).ok());
  EXPECT_EQ(back, source);
}

TEST_F(SocketWindowTest, MemoryNotExposedToTheAskerIsRefusedAndTouchesNothing) {
  std::vector<uint8_t> target(8 << 20, 0), mine(4096, 0), source(8 << 20, 1);
  const auto base = reinterpret_cast<uint64_t>(target.data());
  const auto own = reinterpret_cast<uint64_t>(mine.data());
  w_[1]->Expose(1, 2, base, target.size());  // for rank 2 only
  w_[1]->Expose(2, 0, own, mine.size());     // rank 0's own
  ASSERT_TRUE(Link(0, 1).ok());
  ASSERT_TRUE(Link(2, 1).ok());
  // A batch of three: into rank 0's span, into rank 2's (8 MiB, refused: its bytes are read and
  // dropped), into rank 0's again. The first refusal is the error; the rest went.
  const std::vector<SocketWindows::Op> batch = {{source.data(), own, 16},
                                                {source.data(), base, target.size()},
                                                {source.data(), own + 16, 16}};
  Status st = w_[0]->Execute(1, batch, true, Deadline());
  EXPECT_EQ(st.code(), HCCL_E_REMOTE) << st.message();
  EXPECT_NE(st.message().find("rank 1, desc[1]: it refused the transfer"), std::string::npos)
      << st.message();
  EXPECT_EQ(target, std::vector<uint8_t>(target.size(), 0));
  EXPECT_EQ(mine[0], 1);
  EXPECT_EQ(mine[16], 1);
  // The connection stays usable; a refused get reads nothing either.
  std::vector<uint8_t> back(16, 7);
  const std::vector<SocketWindows::Op> get = {{back.data(), base, 16}};
  EXPECT_EQ(w_[0]->Execute(1, get, false, Deadline()).code(), HCCL_E_REMOTE);
  EXPECT_EQ(back, std::vector<uint8_t>(16, 7));
  const std::vector<SocketWindows::Op> put = {{source.data(), own + 32, 16}};
  EXPECT_TRUE(w_[0]->Execute(1, put, true, Deadline()).ok());
  EXPECT_EQ(mine[32], 1);
  // Rank 2 is served; past the end of its span it is refused.
  const std::vector<SocketWindows::Op> two = {{source.data(), base, 16}};
  EXPECT_TRUE(w_[2]->Execute(1, two, true, Deadline()).ok());
  EXPECT_EQ(target[0], 1);
  const std::vector<SocketWindows::Op> past = {{source.data(), base + target.size() - 8, 16}};
  EXPECT_EQ(w_[2]->Execute(1, past, true, Deadline()).code(), HCCL_E_REMOTE);
}

TEST_F(SocketWindowTest, AStrangerOrAPeerPosingAsAnotherIsNotServed) {
  std::vector<uint8_t> target(4096, 0), source(4096, 1);
  const auto base = reinterpret_cast<uint64_t>(target.data());
  w_[1]->Expose(1, SocketWindows::kAnyPeer, base, target.size());
  // Rank 2 takes the card rank 1 made for rank 0 and connects as rank 2 with it: not taken.
  auto card0 = w_[1]->CardFor(0);
  ASSERT_TRUE(card0.ok());
  ASSERT_TRUE(w_[1]->CardFor(2).ok());
  EXPECT_FALSE(w_[2]->Connect(1, kAddress, *card0, Deadline()).ok());
  // A raw connection that sends garbage where its hello belongs is closed.
  auto addr = bootstrap::ParseEndpoint(kAddress);
  ASSERT_TRUE(addr.ok());
  bootstrap::SetPort(&*addr, card0->port);
  auto fd = bootstrap::Dial(*addr, Deadline());
  ASSERT_TRUE(fd.ok());
  const char junk[64] = "GET / HTTP/1.0\r\n\r\n";
  ASSERT_TRUE(bootstrap::SendAll(fd->get(), junk, sizeof(junk), Deadline()).ok());
  char c = 0;
  EXPECT_LE(::recv(fd->get(), &c, 1, 0), 0);
  // Silent connections: more than may wait for their hello push the oldest out, and the
  // rightful rank is taken all the while.
  std::vector<UniqueFd> silent;
  for (int i = 0; i < 20; ++i) {
    auto s = bootstrap::Dial(*addr, Deadline());
    ASSERT_TRUE(s.ok());
    silent.push_back(std::move(*s));
  }
  ASSERT_TRUE(w_[0]->Connect(1, kAddress, *card0, Deadline()).ok());
  const std::vector<SocketWindows::Op> put = {{source.data(), base, 16}};
  EXPECT_TRUE(w_[0]->Execute(1, put, true, Deadline()).ok());
  EXPECT_EQ(target[0], 1);
  // A token works once: a second connection with it is not taken.
  EXPECT_FALSE(w_[2]->Connect(1, kAddress, *card0, Deadline()).ok());
}

// Whether @fd's other end closed it within @wait (EOF).
// Where @w's service listens, as its card for rank 0 says.
Expected<sockaddr_storage> ServiceOf(SocketWindows &w) {
  auto card = w.CardFor(0);
  if (!card.ok()) {
    return card.status();
  }
  auto at = bootstrap::ParseEndpoint(kAddress);
  if (at.ok()) {
    bootstrap::SetPort(&*at, card->port);
  }
  return at;
}

bool ClosedWithin(int fd, std::chrono::milliseconds wait) {
  pollfd p{fd, POLLIN, 0};
  char c = 0;
  return ::poll(&p, 1, static_cast<int>(wait.count())) == 1 && ::recv(fd, &c, 1, 0) == 0;
}

// A connection from a peer's host (127.0.0.1) that has not sent its hello yet outlives a flood
// of silent connections from another host (127.0.0.2) when the window knows its peers' hosts
// (the flood's first is pushed out, the peer's stays); without them the flood pushes the peer's
// out, the oldest (so the test tells the two apart).
TEST_F(SocketWindowTest, AnotherHostsSilentConnectionsPushOutOnlyEachOther) {
  for (bool known : {true, false}) {
    SCOPED_TRACE(known ? "the peers' hosts known" : "no hosts known");
    auto w = SocketWindows::Open(
        1, 3, kAddress,
        known ? std::vector<std::string>{kAddress, kAddress} : std::vector<std::string>{});
    ASSERT_TRUE(w.ok()) << w.status().message();
    auto at = ServiceOf(**w);
    ASSERT_TRUE(at.ok());
    const auto dial_from = [&](const char *from) {
      UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
      sockaddr_in src{};
      src.sin_family = AF_INET;
      inet_pton(AF_INET, from, &src.sin_addr);
      EXPECT_EQ(::bind(fd.get(), reinterpret_cast<const sockaddr *>(&src), sizeof(src)), 0);
      EXPECT_EQ(::connect(fd.get(), reinterpret_cast<const sockaddr *>(&*at), sizeof(sockaddr_in)),
                0);
      return fd;
    };
    UniqueFd peer = dial_from("127.0.0.1");
    std::vector<UniqueFd> flood;
    for (int i = 0; i < 40; ++i) {
      flood.push_back(dial_from("127.0.0.2"));
    }
    // Well within the 10 s a connection may wait for its hello.
    constexpr std::chrono::milliseconds kWait{5000};
    if (known) {
      EXPECT_TRUE(ClosedWithin(flood[0].get(), kWait)) << "the flood's first was not pushed out";
      EXPECT_FALSE(ClosedWithin(peer.get(), std::chrono::milliseconds(0)))
          << "the peer's connection was pushed out";
    } else {
      EXPECT_TRUE(ClosedWithin(peer.get(), kWait)) << "the oldest was not pushed out";
    }
  }
}

// A flood of silent connections from a host that is not a peer's: each pushes an older one out,
// and the log gets at most 10 of those lines a second, then one line with how many more.
TEST_F(SocketWindowTest, AFloodOfClosedConnectionsLogsAFewLinesASecond) {
  auto w = SocketWindows::Open(1, 3, kAddress, {});
  ASSERT_TRUE(w.ok()) << w.status().message();
  auto at = ServiceOf(**w);
  ASSERT_TRUE(at.ok());
  const auto dial = [&] {
    UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    EXPECT_EQ(::connect(fd.get(), reinterpret_cast<const sockaddr *>(&*at), sizeof(sockaddr_in)),
              0);
    return fd;
  };
  // 16 wait for their hello; each of the next 30 closes the oldest.
  constexpr int kFlood = 46;
  std::vector<UniqueFd> flood;
  const auto t0 = std::chrono::steady_clock::now();
  const auto first = test::StderrLinesOf([&] {
    for (int i = 0; i < kFlood; ++i) {
      flood.push_back(dial());
    }
    EXPECT_TRUE(ClosedWithin(flood[kFlood - 17].get(), std::chrono::milliseconds(5000)));
  });
  const auto took = std::chrono::steady_clock::now() - t0;
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  const auto next = test::StderrLinesOf([&] {
    flood.push_back(dial());
    EXPECT_TRUE(ClosedWithin(flood[kFlood - 16].get(), std::chrono::milliseconds(5000)));
  });
  const std::string line = "connections wait for their hello: the oldest";
  const std::string more = " more connection(s) without a line each";
  const size_t lines = test::LinesContaining(first, line) + test::LinesContaining(next, line);
  const uint64_t skipped =
      test::SumOfCounts(first, "closed ", more) + test::SumOfCounts(next, "closed ", more);
  EXPECT_EQ(lines + skipped, 31U) << "each closed connection logged or counted";
  EXPECT_EQ(test::LinesContaining(next, line), 1U);
  if (took < std::chrono::milliseconds(900)) {  // else the flood spanned seconds (a loaded host)
    EXPECT_EQ(test::LinesContaining(first, line), 10U);
    EXPECT_EQ(test::SumOfCounts(next, "closed ", more), 20U);
  } else {
    EXPECT_LT(test::LinesContaining(first, line), 30U);
  }
}

TEST_F(SocketWindowTest, WithdrawnMemoryIsNotTouchedAfterwards) {
  std::vector<uint8_t> target(8 << 20, 0), source(8 << 20, 3);
  const auto base = reinterpret_cast<uint64_t>(target.data());
  w_[1]->Expose(7, 0, base, target.size());
  ASSERT_TRUE(Link(0, 1).ok());
  // A put in another thread while the span is withdrawn: either it landed whole before, or it is
  // refused or cut; after Withdraw returns nothing changes any more.
  Status st;
  std::thread t([&] {
    const std::vector<SocketWindows::Op> put(4, {source.data(), base, source.size()});
    st = w_[0]->Execute(1, put, true, Deadline());
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  w_[1]->Withdraw(7);
  const std::vector<uint8_t> after = target;
  t.join();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(target, after);
  if (!st.ok()) {
    EXPECT_TRUE(st.code() == HCCL_E_REMOTE || st.code() == HCCL_E_TCP_TRANSFER) << st.message();
  }
  const std::vector<SocketWindows::Op> one = {{source.data(), base, 16}};
  EXPECT_FALSE(w_[0]->Execute(1, one, true, Deadline()).ok());
}

}  // namespace
}  // namespace hzc::transport
