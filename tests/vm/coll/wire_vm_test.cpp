// SPDX-License-Identifier: Apache-2.0
// The wire between servers' leaders (coll/wire.h) on the guest's soft-RoCE device: members are
// threads of this process, each with its own TCP group (bootstrap/group.h) on loopback and its
// own verbs context, so every byte crosses rxe0 as it would between servers.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/group.h"
#include "bootstrap/root_info.h"
#include "coll/wire.h"
#include "loopback_groups.h"
#include "rdma_tool.h"

namespace hzc::coll {
namespace {

using Clock = std::chrono::steady_clock;

// The byte @i of what member @from sends to member @to in round @round.
uint8_t Byte(uint32_t from, uint32_t to, size_t i, int round) {
  return static_cast<uint8_t>(i * 131 + from * 17 + to * 5 + round * 3 + i / 4099);
}

class WireTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::HaveRdmaDevice()) {
      GTEST_SKIP() << "no RDMA device (scripts/vm-run provides rxe0)";
    }
  }

  // @n members, each a thread running @body(member, wire) on its open wire.
  static void RunMembers(uint32_t n, const std::function<void(uint32_t, Wire &)> &body) {
    test::RunGroupRanks(
        n,
        [&](uint32_t r, bootstrap::Group &group) {
          const auto deadline = Clock::now() + std::chrono::seconds(60);
          std::vector<uint32_t> members(n);
          for (uint32_t m = 0; m < n; ++m) {
            members[m] = m;
          }
          auto wire = Wire::Open(group, members, {.tags = 0x1000}, deadline);
          ASSERT_TRUE(wire.ok()) << wire.status().message();
          body(r, **wire);
        },
        std::chrono::seconds(60));
  }
};

// Lengths of 0, 1, around one chunk and several chunks, different per pair and direction,
// twice in a row: every byte arrives once, at its offset, from the right member.
TEST_F(WireTest, MessagesOfEveryLengthArriveWhole) {
  constexpr uint32_t kN = 3;
  const size_t lengths[] = {
      0, 1, Wire::kChunk - 1, Wire::kChunk, Wire::kChunk + 1, 3 * Wire::kChunk + 5};
  auto length = [&](uint32_t from, uint32_t to, int round) {
    return lengths[(from * 2 + to * 3 + round) % std::size(lengths)];
  };
  RunMembers(kN, [&](uint32_t me, Wire &wire) {
    EXPECT_EQ(wire.index(), me);
    for (int round = 0; round < 2; ++round) {
      std::vector<std::vector<uint8_t>> out(kN), got(kN);
      std::vector<Wire::Out> outs(kN);
      std::vector<size_t> in(kN);
      for (uint32_t p = 0; p < kN; ++p) {
        out[p].resize(length(me, p, round));
        for (size_t i = 0; i < out[p].size(); ++i) {
          out[p][i] = Byte(me, p, i, round);
        }
        outs[p] = {out[p].data(), out[p].size()};
        in[p] = p == me ? 0 : length(p, me, round);
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
      for (uint32_t p = 0; p < kN; ++p) {
        if (p == me) {
          continue;
        }
        for (size_t i = 0; i < got[p].size(); ++i) {
          ASSERT_EQ(got[p][i], Byte(p, me, i, round)) << "from " << p << " byte " << i;
        }
      }
    }
    EXPECT_GT(wire.chunks_sent(), 0u);
    EXPECT_GT(wire.chunks_received(), 0u);
  });
}

// A member that fails a call tells the others, who stop waiting for it at once.
TEST_F(WireTest, AnAbortEndsTheOthersWaitsNamingTheMember) {
  RunMembers(3, [&](uint32_t me, Wire &wire) {
    if (me == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      wire.Abort(HCCL_E_ROCE_TRANSFER);
      return;
    }
    const auto start = Clock::now();
    std::vector<size_t> in(3, 64);
    in[me] = 0;
    const Status st = wire.Transfer(
        std::vector<Wire::Out>(3), in, [](uint32_t, size_t, const uint8_t *, size_t) {},
        Clock::now() + std::chrono::seconds(60));
    EXPECT_EQ(st.code(), HCCL_E_REMOTE) << st.message();
    EXPECT_NE(st.message().find("rank 1"), std::string::npos) << st.message();
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
    // The wire stays failed.
    EXPECT_FALSE(wire.Transfer(
                         std::vector<Wire::Out>(3), std::vector<size_t>(3),
                         [](uint32_t, size_t, const uint8_t *, size_t) {}, Clock::now())
                     .ok());
  });
}

// A member that never sends what the others wait for: they give up at the deadline with
// HCCL_E_TIMEOUT naming it.
TEST_F(WireTest, AMemberThatSendsNothingTimesOutNamingIt) {
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

TEST_F(WireTest, ARankOutsideItsMembersIsRefused) {
  auto l = bootstrap::Listener::Open("127.0.0.1");
  ASSERT_TRUE(l.ok());
  auto id = bootstrap::RandomId();
  ASSERT_TRUE(id.ok());
  const std::vector<std::string> addresses{l->address()};
  auto group = bootstrap::Group::Connect(std::move(*l), *id, 0, addresses,
                                         Clock::now() + std::chrono::seconds(5));
  ASSERT_TRUE(group.ok()) << group.status().message();
  auto wire = Wire::Open(**group, {1, 2}, {.tags = 0x1000}, Clock::now() + std::chrono::seconds(5));
  EXPECT_EQ(wire.status().code(), HCCL_E_INTERNAL);
}

}  // namespace
}  // namespace hzc::coll
