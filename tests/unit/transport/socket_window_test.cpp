// SPDX-License-Identifier: Apache-2.0
// One-sided transfers over TCP (transport/socket_window.h) between two endpoints of this process
// on the loopback: puts and gets into exposed memory, what the service thread refuses (memory not
// exposed to the asker, a stranger's hello, a garbled request), and a withdrawal.
#include "transport/socket_window.h"

#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "bootstrap/socket_io.h"
#include "hzc_test.h"

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

TEST_F(SocketWindowTest, MemoryNotExposedToTheAskerIsRefusedAndBreaksThePair) {
  std::vector<uint8_t> target(4096, 0), source(4096, 1);
  const auto base = reinterpret_cast<uint64_t>(target.data());
  w_[1]->Expose(1, 2, base, target.size());  // for rank 2 only
  ASSERT_TRUE(Link(0, 1).ok());
  ASSERT_TRUE(Link(2, 1).ok());
  const std::vector<SocketWindows::Op> put = {{source.data(), base, 16}};
  Status st = w_[0]->Execute(1, put, true, Deadline());
  EXPECT_EQ(st.code(), HCCL_E_REMOTE) << st.message();
  EXPECT_NE(st.message().find("rank 1, desc[0]: it refused the transfer"), std::string::npos)
      << st.message();
  EXPECT_EQ(target[0], 0);
  // The pair is broken from now on; rank 2 is served.
  EXPECT_EQ(w_[0]->Execute(1, put, true, Deadline()).code(), HCCL_E_REMOTE);
  EXPECT_TRUE(w_[2]->Execute(1, put, true, Deadline()).ok());
  EXPECT_EQ(target[0], 1);
  // Past the end of the span, and a span that wraps.
  const std::vector<SocketWindows::Op> past = {{source.data(), base + 4090, 16}};
  EXPECT_EQ(w_[2]->Execute(1, past, true, Deadline()).code(), HCCL_E_REMOTE);
}

TEST_F(SocketWindowTest, AStrangerOrAPeerPosingAsAnotherIsNotServed) {
  std::vector<uint8_t> target(4096, 0), source(4096, 1);
  const auto base = reinterpret_cast<uint64_t>(target.data());
  w_[1]->Expose(1, SocketWindows::kAnyPeer, base, target.size());
  // Rank 2 takes the card rank 1 made for rank 0 and connects as rank 2 with it.
  auto card0 = w_[1]->CardFor(0);
  ASSERT_TRUE(card0.ok());
  ASSERT_TRUE(w_[1]->CardFor(2).ok());
  ASSERT_TRUE(w_[2]->Connect(1, kAddress, *card0, Deadline()).ok());
  const std::vector<SocketWindows::Op> put = {{source.data(), base, 16}};
  Status st = w_[2]->Execute(1, put, true, Clock::now() + std::chrono::seconds(3));
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(target[0], 0);
  // A raw connection that sends garbage where its hello belongs.
  auto addr = bootstrap::ParseEndpoint(kAddress);
  ASSERT_TRUE(addr.ok());
  bootstrap::SetPort(&*addr, card0->port);
  auto fd = bootstrap::Dial(*addr, Deadline());
  ASSERT_TRUE(fd.ok());
  const char junk[64] = "GET / HTTP/1.0\r\n\r\n";
  ASSERT_TRUE(bootstrap::SendAll(fd->get(), junk, sizeof(junk), Deadline()).ok());
  char c = 0;
  EXPECT_LE(::recv(fd->get(), &c, 1, 0), 0);  // closed on it
  // The rightful rank is served all the while.
  ASSERT_TRUE(w_[0]->Connect(1, kAddress, *card0, Deadline()).ok());
  EXPECT_TRUE(w_[0]->Execute(1, put, true, Deadline()).ok());
  EXPECT_EQ(target[0], 1);
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
