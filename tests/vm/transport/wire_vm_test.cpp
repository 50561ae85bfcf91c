// SPDX-License-Identifier: Apache-2.0
// The wire between servers' leaders (transport/wire.h), each test on both kinds of wire: RDMA on
// the guest's soft-RoCE device (skipped without one) and TCP (anywhere: the host runs these as
// hzc_host_wire). Members are threads of this process, each with its own TCP group
// (bootstrap/group.h) on loopback and, over RDMA, its own verbs context, so every byte crosses
// rxe0 or a TCP connection as it would between servers.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/group.h"
#include "bootstrap/root_info.h"
#include "loopback_groups.h"
#include "rdma_tool.h"
#include "transport/wire.h"

namespace hzc::transport {
namespace {

using Clock = std::chrono::steady_clock;

// The byte @i of what member @from sends to member @to in round @round.
uint8_t Byte(uint32_t from, uint32_t to, size_t i, int round) {
  return static_cast<uint8_t>(i * 131 + from * 17 + to * 5 + round * 3 + i / 4099);
}

// One transfer on @wire from member @me of @n: @length(from, to) bytes from each member to each
// other (Byte(from, to, i, @round)), every byte checked where it arrives.
void ExchangeChecked(Wire &wire, uint32_t n, uint32_t me,
                     const std::function<size_t(uint32_t from, uint32_t to)> &length, int round) {
  std::vector<std::vector<uint8_t>> out(n), got(n);
  std::vector<Wire::Out> outs(n);
  std::vector<size_t> in(n);
  for (uint32_t p = 0; p < n; ++p) {
    out[p].resize(p == me ? 0 : length(me, p));
    for (size_t i = 0; i < out[p].size(); ++i) {
      out[p][i] = Byte(me, p, i, round);
    }
    outs[p] = {out[p].data(), out[p].size()};
    in[p] = p == me ? 0 : length(p, me);
    got[p].assign(in[p], 0);
  }
  const Status st = wire.Transfer(
      outs, in,
      [&](uint32_t from, size_t off, const uint8_t *d, size_t len) {
        ASSERT_LE(off + len, got[from].size());
        std::memcpy(got[from].data() + off, d, len);
      },
      Clock::now() + std::chrono::seconds(120));
  ASSERT_TRUE(st.ok()) << st.message();
  for (uint32_t p = 0; p < n; ++p) {
    for (size_t i = 0; i < got[p].size(); ++i) {
      ASSERT_EQ(got[p][i], Byte(p, me, i, round)) << "from " << p << " byte " << i;
    }
  }
}

// Until @flag is set or a minute has passed: whether it was set.
bool AwaitFlag(const std::atomic<bool> &flag) {
  const auto until = Clock::now() + std::chrono::seconds(60);
  while (!flag && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return flag.load();
}

// Member @me of a pair links with the other at a first transfer, which takes both: one byte
// from member 1 to 0 (no chunk from 0 to 1 yet).
void LinkPair(uint32_t me, Wire &wire) {
  const uint8_t hello = 7;
  std::vector<Wire::Out> first(2);
  std::vector<size_t> first_in(2);
  if (me == 1) {
    first[0] = {&hello, 1};
  } else {
    first_in[1] = 1;
  }
  ASSERT_TRUE(wire.Transfer(
                      first, first_in, [](uint32_t, size_t, const uint8_t *, size_t) {},
                      Clock::now() + std::chrono::seconds(60))
                  .ok());
}

std::string NetName(NetChoice net) {
  return net == NetChoice::kRdma ? "Rdma" : "Socket";
}

class WireTest : public ::testing::TestWithParam<NetChoice> {
 protected:
  void SetUp() override {
    if (GetParam() == NetChoice::kRdma && !test::HaveRdmaDevice()) {
      GTEST_SKIP() << "no RDMA device (scripts/vm-run provides rxe0)";
    }
  }

  // @n members, each a thread opening its wire with @slots(member) landing slots per peer (and
  // HZC_NET @net(member), the test's kind by default) and running @body(member, what Open
  // returned).
  static void OpenMembers(
      uint32_t n, const std::function<uint32_t(uint32_t)> &slots,
      const std::function<void(uint32_t, Expected<std::unique_ptr<Wire>> &)> &body,
      const std::function<NetChoice(uint32_t)> &net = nullptr) {
    test::RunGroupRanks(
        n,
        [&](uint32_t r, bootstrap::Group &group) {
          const auto deadline = Clock::now() + std::chrono::seconds(60);
          std::vector<uint32_t> members(n);
          for (uint32_t m = 0; m < n; ++m) {
            members[m] = m;
          }
          auto wire = Wire::Open(
              group, members, {.tags = 0x1000, .slots = slots(r), .net = net ? net(r) : GetParam()},
              deadline);
          if (wire.ok()) {
            EXPECT_STREQ((*wire)->kind(), GetParam() == NetChoice::kRdma ? "RDMA" : "TCP");
          }
          body(r, wire);
        },
        std::chrono::seconds(60));
  }

  // EveryLengthArrivesWholeAndInOrderBothWays with @slots slots per peer.
  void EveryLength(uint32_t slots);

  // @n members, each a thread running @body(member, wire) on its open wire of @slots slots,
  // then closing it as its users do (a member's last credits may still be on their way to a
  // peer whose transfer is done; a wire that failed skips the goodbye).
  static void RunMembers(uint32_t n, const std::function<void(uint32_t, Wire &)> &body,
                         uint32_t slots = 1) {
    OpenMembers(
        n, [&](uint32_t) { return slots; },
        [&](uint32_t r, Expected<std::unique_ptr<Wire>> &wire) {
          ASSERT_TRUE(wire.ok()) << wire.status().message();
          body(r, **wire);
          (*wire)->Close(Clock::now() + std::chrono::seconds(2));
        });
  }
};

// Lengths of 0, 1, around one chunk and several chunks, different per pair and direction,
// twice in a row: every byte arrives once, at its offset, from the right member.
TEST_P(WireTest, MessagesOfEveryLengthArriveWhole) {
  constexpr uint32_t kN = 3;
  const size_t lengths[] = {
      0, 1, Wire::kChunk - 1, Wire::kChunk, Wire::kChunk + 1, 3 * Wire::kChunk + 5};
  auto length = [&](uint32_t from, uint32_t to, int round) {
    return lengths[(from * 2 + to * 3 + round) % std::size(lengths)];
  };
  RunMembers(kN, [&](uint32_t me, Wire &wire) {
    EXPECT_EQ(wire.index(), me);
    for (int round = 0; round < 2; ++round) {
      ASSERT_NO_FATAL_FAILURE(ExchangeChecked(
          wire, kN, me, [&](uint32_t from, uint32_t to) { return length(from, to, round); },
          round));
    }
    EXPECT_GT(wire.chunks_sent(), 0u);
    EXPECT_GT(wire.chunks_received(), 0u);
  });
}

// A member that fails a call tells the others, who stop waiting for it at once. (Every member
// keeps its wire until all are done: one that goes away closes its connections, which would
// end the others' waits naming it instead.)
TEST_P(WireTest, AnAbortEndsTheOthersWaitsNamingTheMember) {
  std::atomic<int> done{0};
  auto leave = [&] {
    ++done;
    const auto until = Clock::now() + std::chrono::seconds(30);
    while (done < 3 && Clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  };
  RunMembers(3, [&](uint32_t me, Wire &wire) {
    if (me == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      wire.Abort(HCCL_E_ROCE_TRANSFER);
      leave();
      return;
    }
    const auto start = Clock::now();
    std::vector<size_t> in(3, 64);
    in[me] = 0;
    const Status st = wire.Transfer(
        std::vector<Wire::Out>(3), in, [](uint32_t, size_t, const uint8_t *, size_t) {},
        Clock::now() + std::chrono::seconds(60));
    leave();
    EXPECT_EQ(st.code(), HCCL_E_REMOTE) << st.message();
    EXPECT_NE(st.message().find("rank 1"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("code 14"), std::string::npos) << st.message();
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
    // The wire stays failed.
    EXPECT_FALSE(wire.Transfer(
                         std::vector<Wire::Out>(3), std::vector<size_t>(3),
                         [](uint32_t, size_t, const uint8_t *, size_t) {}, Clock::now())
                     .ok());
  });
}

// A wire links a pair at the first transfer that moves bytes between its members (TCP: a
// connection; RDMA: queue pairs and registered areas): a ring of transfers (each member to the
// next) leaves each with its two neighbours, and a transfer among all then links the rest.
TEST_P(WireTest, APairConnectsAtItsFirstTransfer) {
  static constexpr uint32_t kN = 5;
  // Each member counts its links before any moves on: a member ahead connects to those behind.
  std::barrier counted(kN);
  RunMembers(kN, [&](uint32_t me, Wire &wire) {
    EXPECT_EQ(wire.links(), 0u);
    counted.arrive_and_wait();
    auto run = [&](const std::function<bool(uint32_t from, uint32_t to)> &pair, int round) {
      ExchangeChecked(
          wire, kN, me,
          [&](uint32_t from, uint32_t to) { return pair(from, to) ? size_t{100} + to : 0; }, round);
    };
    run([&](uint32_t from, uint32_t to) { return to == (from + 1) % kN; }, 0);
    EXPECT_EQ(wire.links(), 2u);
    counted.arrive_and_wait();
    run([&](uint32_t from, uint32_t to) { return to == (from + 1) % kN; }, 1);  // no new ones
    EXPECT_EQ(wire.links(), 2u);
    counted.arrive_and_wait();
    run([](uint32_t, uint32_t) { return true; }, 2);
    EXPECT_EQ(wire.links(), kN - 1);
  });
}

// A member whose process ended before it connected to the others (its wire gone, listener and
// all): a member that waits for its connection learns it from the refused listener and fails with
// HCCL_E_REMOTE naming it, long before its deadline.
TEST_P(WireTest, AMemberGoneBeforeItConnectedFailsTheOthersNamingIt) {
  if (GetParam() != NetChoice::kSocket) {
    GTEST_SKIP() << "RDMA pairs link over the group, which ends with the process, not the wire "
                    "(the two-guest suite's dead server)";
  }
  OpenMembers(
      2, [](uint32_t) { return 1u; },
      [](uint32_t me, Expected<std::unique_ptr<Wire>> &wire) {
        ASSERT_TRUE(wire.ok()) << wire.status().message();
        if (me == 0) {
          wire->reset();
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        const auto start = Clock::now();
        const Status st = (*wire)->Transfer(
            std::vector<Wire::Out>(2), {16, 0}, [](uint32_t, size_t, const uint8_t *, size_t) {},
            Clock::now() + std::chrono::seconds(60));
        EXPECT_EQ(st.code(), HCCL_E_REMOTE) << st.message();
        EXPECT_NE(st.message().find("rank 0"), std::string::npos) << st.message();
        EXPECT_NE(st.message().find("is gone"), std::string::npos) << st.message();
        EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
      });
}

// Members told different HZC_NET values refuse the wire at once, each naming the others.
TEST_P(WireTest, MembersWithDifferentNetRefuseTheWireAtOnce) {
  const auto start = Clock::now();
  OpenMembers(
      2, [](uint32_t) { return 1u; },
      [](uint32_t, Expected<std::unique_ptr<Wire>> &wire) {
        EXPECT_EQ(wire.status().code(), HCCL_E_PARA) << wire.status().message();
        EXPECT_NE(wire.status().message().find("HZC_NET differs"), std::string::npos)
            << wire.status().message();
        EXPECT_NE(wire.status().message().find("rank(s) 0 rdma, rank(s) 1 socket"),
                  std::string::npos)
            << wire.status().message();
      },
      [](uint32_t r) { return r == 0 ? NetChoice::kRdma : NetChoice::kSocket; });
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
}

// A member whose wire goes away without a word (its process died): the others' transfers with it
// fail at once with HCCL_E_REMOTE naming it (TCP: the connection closes; RDMA needs the probe's
// retries, see ACutLink... in the two-guest suite).
TEST_P(WireTest, AMemberWhoseConnectionsCloseFailsTheOthersNamingIt) {
  if (GetParam() != NetChoice::kSocket) {
    GTEST_SKIP() << "TCP: a closed connection; RDMA probes (the two-guest suite's fault tests)";
  }
  OpenMembers(
      3, [](uint32_t) { return 1u; },
      [](uint32_t me, Expected<std::unique_ptr<Wire>> &wire) {
        ASSERT_TRUE(wire.ok()) << wire.status().message();
        if (me == 1) {
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
          wire->reset();
          return;
        }
        const auto start = Clock::now();
        std::vector<size_t> in(3, Wire::kChunk);  // what 0 and 2 exchange arrives
        in[me] = 0;
        std::vector<uint8_t> out(Wire::kChunk);
        std::vector<Wire::Out> outs(3, Wire::Out{out.data(), out.size()});
        const Status st = (*wire)->Transfer(
            outs, in, [](uint32_t, size_t, const uint8_t *, size_t) {},
            Clock::now() + std::chrono::seconds(60));
        EXPECT_EQ(st.code(), HCCL_E_REMOTE) << st.message();
        EXPECT_NE(st.message().find("rank 1"), std::string::npos) << st.message();
        EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
      });
}

// Members that disagree on a length (a buggy or hostile peer): the receiver sees a frame that is
// not the one due and fails with HCCL_E_TCP_TRANSFER naming the sender; nothing of the frame
// reaches its sink.
TEST_P(WireTest, AFrameThatIsNotTheOneDueBreaksTheWire) {
  if (GetParam() != NetChoice::kSocket) {
    GTEST_SKIP() << "TCP: frame headers (RDMA chunks carry none)";
  }
  RunMembers(2, [&](uint32_t me, Wire &wire) {
    std::vector<uint8_t> out(100, 7);
    size_t got = 0;
    const Status st = wire.Transfer(
        {{}, {me == 0 ? out.data() : nullptr, me == 0 ? out.size() : 0}}, {me == 1 ? 200u : 0u, 0},
        [&](uint32_t, size_t, const uint8_t *, size_t len) { got += len; },
        Clock::now() + std::chrono::seconds(20));
    if (me == 0) {
      EXPECT_TRUE(st.ok()) << st.message();
      return;
    }
    EXPECT_EQ(st.code(), HCCL_E_TCP_TRANSFER) << st.message();
    EXPECT_NE(st.message().find("rank 0"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("100 bytes"), std::string::npos) << st.message();
    EXPECT_EQ(got, 0u);
  });
}

// A member that never sends what the others wait for: they give up at the deadline with
// HCCL_E_TIMEOUT naming it.
TEST_P(WireTest, AMemberThatSendsNothingTimesOutNamingIt) {
  RunMembers(2, [&](uint32_t me, Wire &wire) {
    if (me == 1) {
      std::this_thread::sleep_for(std::chrono::seconds(4));  // alive, silent
      return;
    }
    const Status st = wire.Transfer(
        std::vector<Wire::Out>(2), {0, 16}, [](uint32_t, size_t, const uint8_t *, size_t) {},
        Clock::now() + std::chrono::seconds(2));
    EXPECT_EQ(st.code(), HCCL_E_TIMEOUT) << st.message();
    EXPECT_NE(st.message().find("rank 1"), std::string::npos) << st.message();
  });
}

TEST_P(WireTest, ARankOutsideItsMembersIsRefused) {
  auto l = bootstrap::Listener::Open("127.0.0.1");
  ASSERT_TRUE(l.ok());
  auto id = bootstrap::RandomId();
  ASSERT_TRUE(id.ok());
  const std::vector<std::string> addresses{l->address()};
  auto group = bootstrap::Group::Connect(std::move(*l), *id, 0, addresses,
                                         Clock::now() + std::chrono::seconds(5));
  ASSERT_TRUE(group.ok()) << group.status().message();
  auto wire = Wire::Open(**group, {1, 2}, {.tags = 0x1000, .net = GetParam()},
                         Clock::now() + std::chrono::seconds(5));
  EXPECT_EQ(wire.status().code(), HCCL_E_INTERNAL);
}

TEST_P(WireTest, ASlotCountOfZeroOrTooManyIsRefused) {
  auto l = bootstrap::Listener::Open("127.0.0.1");
  ASSERT_TRUE(l.ok());
  auto id = bootstrap::RandomId();
  ASSERT_TRUE(id.ok());
  const std::vector<std::string> addresses{l->address()};
  auto group = bootstrap::Group::Connect(std::move(*l), *id, 0, addresses,
                                         Clock::now() + std::chrono::seconds(5));
  ASSERT_TRUE(group.ok()) << group.status().message();
  for (const uint32_t slots : {0u, Wire::kMaxSlots + 1, ~0u}) {
    auto wire = Wire::Open(**group, {0}, {.tags = 0x1000, .slots = slots, .net = GetParam()},
                           Clock::now() + std::chrono::seconds(5));
    EXPECT_EQ(wire.status().code(), HCCL_E_PARA) << slots;
    EXPECT_NE(wire.status().message().find("slots"), std::string::npos) << wire.status().message();
  }
}

// Members that disagree on the slot count would write past each other's slots: every one of
// them refuses the wire (RDMA; TCP has no slots of its own).
TEST_P(WireTest, MembersWithDifferentSlotCountsRefuseTheWire) {
  if (GetParam() != NetChoice::kRdma) {
    GTEST_SKIP() << "the RDMA wire's landing slots";
  }
  OpenMembers(
      2, [](uint32_t r) { return r + 1; },
      [](uint32_t, Expected<std::unique_ptr<Wire>> &wire) {
        EXPECT_EQ(wire.status().code(), HCCL_E_PARA) << wire.status().message();
        EXPECT_NE(wire.status().message().find("slot counts differ"), std::string::npos)
            << wire.status().message();
      });
}

// With S slots a sender writes S chunks into a peer that consumes none of them yet, and not
// one more: the next chunk waits for the peer's credit (here until the deadline). Messages below
// Wire::kPlaceMin, one chunk each (a larger one waits for the receiver's word first:
// AMessageOfPlaceMinWaitsForTheReceiversWord). RDMA: over TCP the socket buffers are the slots.
TEST_P(WireTest, ASenderRunsAheadByItsSlotsAndNoFurther) {
  if (GetParam() != NetChoice::kRdma) {
    GTEST_SKIP() << "the RDMA wire's landing slots";
  }
  constexpr uint32_t kSlots = 4;
  constexpr size_t kLen = Wire::kPlaceMin - 1;
  std::atomic<bool> sent{false}, received{false};
  RunMembers(
      2,
      [&](uint32_t me, Wire &wire) {
        ASSERT_NO_FATAL_FAILURE(LinkPair(me, wire));
        if (me == 0) {
          std::vector<uint8_t> out(kSlots * kLen + 1);
          for (size_t i = 0; i < out.size(); ++i) {
            out[i] = Byte(0, 1, i, 0);
          }
          const auto none = [](uint32_t, size_t, const uint8_t *, size_t) {};
          Status ahead;
          for (uint32_t k = 0; k < kSlots && ahead.ok(); ++k) {
            ahead = wire.Transfer({{}, {out.data() + k * kLen, kLen}}, {0, 0}, none,
                                  Clock::now() + std::chrono::seconds(60));
          }
          const uint64_t chunks = wire.chunks_sent();
          const Status beyond = wire.Transfer({{}, {out.data() + kSlots * kLen, 1}}, {0, 0}, none,
                                              Clock::now() + std::chrono::seconds(3));
          sent = true;
          // The queue pair stays until member 1 has returned its credits.
          EXPECT_TRUE(AwaitFlag(received));
          ASSERT_TRUE(ahead.ok()) << ahead.message();
          EXPECT_EQ(chunks, kSlots);
          EXPECT_EQ(beyond.code(), HCCL_E_TIMEOUT) << beyond.message();
          EXPECT_NE(beyond.message().find("rank 1"), std::string::npos) << beyond.message();
          EXPECT_NE(beyond.message().find("room"), std::string::npos) << beyond.message();
          EXPECT_EQ(wire.chunks_sent(), kSlots);
          return;
        }
        // Member 1 starts receiving once member 0 is done with its transfers.
        const bool started = AwaitFlag(sent);
        std::vector<uint8_t> got(kSlots * kLen);
        Status st;
        for (uint32_t k = 0; k < kSlots && st.ok(); ++k) {
          st = wire.Transfer(
              std::vector<Wire::Out>(2), {kLen, 0},
              [&](uint32_t, size_t off, const uint8_t *d, size_t len) {
                std::memcpy(got.data() + k * kLen + off, d, len);
              },
              Clock::now() + std::chrono::seconds(60));
        }
        received = true;
        ASSERT_TRUE(started) << "member 0 never finished";
        ASSERT_TRUE(st.ok()) << st.message();
        EXPECT_EQ(wire.chunks_received(), kSlots);
        for (size_t i = 0; i < got.size(); ++i) {
          ASSERT_EQ(got[i], Byte(0, 1, i, 0)) << "byte " << i;
        }
      },
      kSlots);
}

// A message of kPlaceMin bytes or more goes only once its receiver said where (its want): a
// receiver that never takes it leaves the sender with no chunk sent, timing out naming it.
TEST_P(WireTest, AMessageOfPlaceMinWaitsForTheReceiversWord) {
  if (GetParam() != NetChoice::kRdma) {
    GTEST_SKIP() << "the RDMA wire's wants";
  }
  std::atomic<bool> done{false};
  RunMembers(2, [&](uint32_t me, Wire &wire) {
    ASSERT_NO_FATAL_FAILURE(LinkPair(me, wire));
    if (me == 1) {
      EXPECT_TRUE(AwaitFlag(done));
      return;
    }
    std::vector<uint8_t> out(Wire::kPlaceMin, 1);
    const Status st = wire.Transfer(
        {{}, {out.data(), out.size()}}, {0, 0}, [](uint32_t, size_t, const uint8_t *, size_t) {},
        Clock::now() + std::chrono::seconds(3));
    done = true;
    EXPECT_EQ(st.code(), HCCL_E_TIMEOUT) << st.message();
    EXPECT_NE(st.message().find("rank 1"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("where its data goes"), std::string::npos) << st.message();
    EXPECT_EQ(wire.chunks_sent(), 0u);
  });
}

// Messages a receiver only places (Wire::Place): at the edges of kPlaceMin and of a chunk, into
// a registered region at an offset (over RDMA written there by the sender: counted placed), to
// a destination no region holds and to the sink (through the landing slots: counted landed),
// the kinds mixed between members and rounds so that the wants are taken in turn; then the
// region withdrawn (as a deactivation does) and another at the same address used on (the
// count of registrations: ARegionSentFromAndPlacedIntoIsRegisteredOncePerDirection). Every byte
// checked where it arrives; over TCP nothing is counted.
TEST_P(WireTest, PlacedMessagesArriveWhereTheReceiverSays) {
  constexpr uint32_t kN = 3;
  const size_t lengths[] = {Wire::kPlaceMin - 1, Wire::kPlaceMin, Wire::kPlaceMin + 1,
                            Wire::kChunk + 3, 2 * Wire::kChunk + 7};
  constexpr size_t kRoom = 3 * Wire::kChunk;  // per member: a destination at offset 64
  const bool rdma = GetParam() == NetChoice::kRdma;
  test::RunGroupRanks(
      kN,
      [&](uint32_t me, bootstrap::Group &group) {
        std::vector<uint32_t> members{0, 1, 2};
        auto wire = Wire::Open(group, members, {.tags = 0x1000, .slots = 2, .net = GetParam()},
                               Clock::now() + std::chrono::seconds(60));
        ASSERT_TRUE(wire.ok()) << wire.status().message();
        // One region holds every member's destination (page-aligned, as activated memory is).
        std::vector<uint8_t> arena(kN * kRoom + 8192);
        auto *base = reinterpret_cast<uint8_t *>(
            (reinterpret_cast<uintptr_t>(arena.data()) + 4095) / 4096 * 4096);
        const size_t span = kN * kRoom;
        uint64_t serial = 1;
        uint64_t placed = 0, landed = 0;  // expected, over RDMA
        for (int round = 0; round < 6; ++round) {
          if (round == 4) {
            (*wire)->Withdraw(reinterpret_cast<uintptr_t>(base), span);
            ++serial;
          }
          std::vector<std::vector<uint8_t>> out(kN), plain(kN), sunk(kN);
          std::vector<Wire::Out> outs(kN);
          std::vector<size_t> in(kN);
          std::vector<Wire::Place> places(kN);
          // The kind of member p's message to this one: 0 into the region, 1 to plain memory,
          // 2 to the sink.
          auto kind = [&](uint32_t from, uint32_t to) { return (from + 2 * to + round) % 3; };
          auto length = [&](uint32_t from, uint32_t to) {
            return lengths[(from * 3 + to + round) % std::size(lengths)];
          };
          for (uint32_t p = 0; p < kN; ++p) {
            if (p == me) {
              continue;
            }
            out[p].resize(length(me, p));
            for (size_t i = 0; i < out[p].size(); ++i) {
              out[p][i] = Byte(me, p, i, round);
            }
            outs[p] = {out[p].data(), out[p].size()};
            in[p] = length(p, me);
            uint8_t *room = base + p * kRoom + 64;
            std::memset(room, 0, in[p]);
            switch (kind(p, me)) {
              case 0:
                places[p] = {room, {reinterpret_cast<uintptr_t>(base), span, serial}};
                (in[p] >= Wire::kPlaceMin ? placed : landed) += in[p];
                break;
              case 1:
                plain[p].assign(in[p], 0);
                places[p] = {plain[p].data(), {}};
                landed += in[p];
                break;
              default:
                sunk[p].assign(in[p], 0);
                landed += in[p];
            }
          }
          const Status st = (*wire)->Transfer(
              outs, in,
              [&](uint32_t from, size_t off, const uint8_t *d, size_t len) {
                ASSERT_EQ(kind(from, me), 2u) << "a placed message reached the sink";
                ASSERT_LE(off + len, sunk[from].size());
                std::memcpy(sunk[from].data() + off, d, len);
              },
              Clock::now() + std::chrono::seconds(120), places);
          ASSERT_TRUE(st.ok()) << st.message();
          EXPECT_EQ((*wire)->windows_open(), 0u) << "a window outlived its transfer";
          for (uint32_t p = 0; p < kN; ++p) {
            if (p == me) {
              continue;
            }
            const uint8_t *got = kind(p, me) == 0   ? base + p * kRoom + 64
                                 : kind(p, me) == 1 ? plain[p].data()
                                                    : sunk[p].data();
            for (size_t i = 0; i < in[p]; ++i) {
              ASSERT_EQ(got[i], Byte(p, me, i, round))
                  << "round " << round << ", from " << p << " (kind " << kind(p, me) << ", "
                  << in[p] << " bytes), byte " << i;
            }
          }
        }
        EXPECT_EQ(group.traffic().wire_placed.load(), rdma ? placed : 0);
        EXPECT_EQ(group.traffic().wire_landed.load(), rdma ? landed : 0);
        EXPECT_GT(placed, 0u);
        (*wire)->Close(Clock::now() + std::chrono::seconds(2));
      },
      std::chrono::seconds(120));
}

// One region that a member both sends from and receives into with the same peer (a ring
// AllReduce's buffer) is registered once per direction and kept: three rounds, two
// registrations on each member; once withdrawn and activated anew (another number), two more.
TEST_P(WireTest, ARegionSentFromAndPlacedIntoIsRegisteredOncePerDirection) {
  if (GetParam() != NetChoice::kRdma) {
    GTEST_SKIP() << "the RDMA wire's registrations";
  }
  constexpr size_t kLen = Wire::kPlaceMin;
  RunMembers(2, [&](uint32_t me, Wire &wire) {
    const uint32_t peer = 1 - me;
    std::vector<uint8_t> arena(2 * kLen + 8192);
    auto *base = reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(arena.data()) + 4095) /
                                             4096 * 4096);
    Wire::Region region{reinterpret_cast<uintptr_t>(base), 2 * kLen, 1};
    for (int round = 0; round < 4; ++round) {
      if (round == 3) {
        wire.Withdraw(region.base, region.len);
        region.serial = 2;
      }
      for (size_t i = 0; i < kLen; ++i) {
        base[i] = Byte(me, peer, i, round);
      }
      std::memset(base + kLen, 0, kLen);
      std::vector<Wire::Out> out(2);
      std::vector<size_t> in(2);
      std::vector<Wire::Place> places(2);
      out[peer] = {base, kLen, region};
      in[peer] = kLen;
      places[peer] = {base + kLen, region};
      const Status st = wire.Transfer(
          out, in, [](uint32_t, size_t, const uint8_t *, size_t) { FAIL() << "not placed"; },
          Clock::now() + std::chrono::seconds(60), places);
      ASSERT_TRUE(st.ok()) << st.message();
      for (size_t i = 0; i < kLen; ++i) {
        ASSERT_EQ(base[kLen + i], Byte(peer, me, i, round)) << "round " << round << " byte " << i;
      }
      EXPECT_EQ(wire.registrations(), round < 3 ? 2u : 4u) << "round " << round;
    }
  });
}

// A transfer that fails after it told a member where to write closes that member's window
// before it returns (a late write would fail at the member's device, not land in the caller's
// memory): member 1 takes a placed message from member 0 but waits in vain for member 2. The
// registration under the window stays (its own key reaches nothing).
TEST_P(WireTest, AFailedTransferRevokesTheWritesItAllowed) {
  if (GetParam() != NetChoice::kRdma) {
    GTEST_SKIP() << "the RDMA wire's registrations";
  }
  std::atomic<bool> done{false};
  RunMembers(3, [&](uint32_t me, Wire &wire) {
    // Every pair links first: one byte each way.
    std::vector<uint8_t> one(3, 1);
    std::vector<Wire::Out> hello(3);
    std::vector<size_t> hello_in(3);
    for (uint32_t p = 0; p < 3; ++p) {
      if (p != me) {
        hello[p] = {&one[p], 1};
        hello_in[p] = 1;
      }
    }
    ASSERT_TRUE(wire.Transfer(
                        hello, hello_in, [](uint32_t, size_t, const uint8_t *, size_t) {},
                        Clock::now() + std::chrono::seconds(60))
                    .ok());
    std::vector<uint8_t> arena(Wire::kPlaceMin + 8192, 0);
    auto *base = reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(arena.data()) + 4095) /
                                             4096 * 4096);
    if (me == 0) {
      std::vector<Wire::Out> out(3);
      out[1] = {base, Wire::kPlaceMin};
      const Status st = wire.Transfer(
          out, std::vector<size_t>(3), [](uint32_t, size_t, const uint8_t *, size_t) {},
          Clock::now() + std::chrono::seconds(60));
      EXPECT_TRUE(st.ok()) << st.message();
    } else if (me == 1) {
      std::vector<size_t> in(3);
      in[0] = Wire::kPlaceMin;
      in[2] = 1;  // never sent
      std::vector<Wire::Place> places(3);
      places[0] = {base, {reinterpret_cast<uintptr_t>(base), Wire::kPlaceMin, 1}};
      const Status st = wire.Transfer(
          std::vector<Wire::Out>(3), in, [](uint32_t, size_t, const uint8_t *, size_t) {},
          Clock::now() + std::chrono::seconds(3), places);
      EXPECT_EQ(st.code(), HCCL_E_TIMEOUT) << st.message();
      EXPECT_EQ(wire.registrations(), 1u);
      EXPECT_EQ(wire.registrations_kept(), 1u);
      EXPECT_EQ(wire.windows_open(), 0u);
      done = true;
    }
    if (me != 1) {
      EXPECT_TRUE(AwaitFlag(done));
    }
  });
}

// A sender whose message is not the length its receiver expects (a want for another length)
// fails at once with HCCL_E_ROCE_TRANSFER naming the receiver, before any chunk; its abort ends
// the receiver's wait naming it.
TEST_P(WireTest, AWantForAnotherLengthBreaksTheWire) {
  if (GetParam() != NetChoice::kRdma) {
    GTEST_SKIP() << "the RDMA wire's wants";
  }
  RunMembers(2, [&](uint32_t me, Wire &wire) {
    std::vector<uint8_t> buf(Wire::kPlaceMin + 1, 3);
    std::vector<Wire::Out> out(2);
    std::vector<size_t> in(2);
    if (me == 0) {
      out[1] = {buf.data(), buf.size()};
    } else {
      in[0] = Wire::kPlaceMin;
    }
    const Status st = wire.Transfer(
        out, in, [](uint32_t, size_t, const uint8_t *, size_t) {},
        Clock::now() + std::chrono::seconds(30));
    if (me == 0) {
      EXPECT_EQ(st.code(), HCCL_E_ROCE_TRANSFER) << st.message();
      EXPECT_NE(st.message().find("rank 1"), std::string::npos) << st.message();
      EXPECT_NE(st.message().find("broke the wire's protocol"), std::string::npos) << st.message();
      EXPECT_EQ(wire.chunks_sent(), 0u);
      wire.Abort(st.code());
    } else {
      EXPECT_EQ(st.code(), HCCL_E_REMOTE) << st.message();
      EXPECT_NE(st.message().find("rank 0"), std::string::npos) << st.message();
    }
  });
}

// Every length (0, 1, around a chunk, several chunks and odd bytes), a different one on each
// pair and direction at once, for several rounds in a row (so the chunk streams start at any
// slot): every byte arrives once, at its offset, from the right member, each member's chunks in
// order, with 1, 2 and 4 slots.
TEST_P(WireTest, EveryLengthArrivesWholeAndInOrderBothWays) {
  for (const uint32_t slots : {1u, 2u, 4u}) {
    SCOPED_TRACE("slots " + std::to_string(slots));
    EveryLength(slots);
  }
}

void WireTest::EveryLength(uint32_t slots) {
  constexpr uint32_t kN = 3;
  constexpr int kRounds = 3;
  const size_t lengths[] = {0,
                            1,
                            Wire::kChunk - 1,
                            Wire::kChunk,
                            Wire::kChunk + 1,
                            2 * Wire::kChunk + 7,
                            5 * Wire::kChunk + 3};
  // Distinct for the 6 ordered pairs of one round.
  auto length = [&](uint32_t from, uint32_t to, int round) {
    return lengths[(from * 2 + to * 3 + round) % std::size(lengths)];
  };
  auto chunks = [](size_t len) { return (len + Wire::kChunk - 1) / Wire::kChunk; };
  RunMembers(
      kN,
      [&](uint32_t me, Wire &wire) {
        uint64_t sent_chunks = 0, received_chunks = 0;
        for (int round = 0; round < kRounds; ++round) {
          std::vector<std::vector<uint8_t>> out(kN), got(kN);
          std::vector<Wire::Out> outs(kN);
          std::vector<size_t> in(kN), next(kN);
          for (uint32_t p = 0; p < kN; ++p) {
            out[p].resize(p == me ? 0 : length(me, p, round));
            for (size_t i = 0; i < out[p].size(); ++i) {
              out[p][i] = Byte(me, p, i, round);
            }
            outs[p] = {out[p].data(), out[p].size()};
            in[p] = p == me ? 0 : length(p, me, round);
            got[p].assign(in[p], 0);
            sent_chunks += chunks(out[p].size());
            received_chunks += chunks(in[p]);
          }
          const Status st = wire.Transfer(
              outs, in,
              [&](uint32_t from, size_t off, const uint8_t *d, size_t len) {
                ASSERT_LT(from, kN);
                ASSERT_NE(from, me);
                // In order, whole chunks but the last.
                ASSERT_EQ(off, next[from]) << "from " << from;
                ASSERT_EQ(len, std::min(Wire::kChunk, in[from] - off)) << "from " << from;
                std::memcpy(got[from].data() + off, d, len);
                next[from] += len;
              },
              Clock::now() + std::chrono::seconds(120));
          ASSERT_TRUE(st.ok()) << st.message();
          for (uint32_t p = 0; p < kN; ++p) {
            if (p == me) {
              continue;
            }
            ASSERT_EQ(next[p], in[p]) << "from " << p << " in round " << round;
            for (size_t i = 0; i < got[p].size(); ++i) {
              ASSERT_EQ(got[p][i], Byte(p, me, i, round))
                  << "from " << p << " byte " << i << " in round " << round;
            }
          }
        }
        EXPECT_EQ(wire.chunks_sent(), sent_chunks);
        EXPECT_EQ(wire.chunks_received(), received_chunks);
      },
      slots);
}

INSTANTIATE_TEST_SUITE_P(Net, WireTest, ::testing::Values(NetChoice::kRdma, NetChoice::kSocket),
                         [](const auto &param) { return NetName(param.param); });

}  // namespace
}  // namespace hzc::transport
