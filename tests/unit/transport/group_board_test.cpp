// SPDX-License-Identifier: Apache-2.0
// Link setup's board over the TCP connections of a communicator that spans servers
// (transport/group_board.h): ranks are threads with their own groups on loopback.
#include "transport/group_board.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "loopback_groups.h"
#include "verbs/links.h"

namespace hzc::transport {
namespace {

using Clock = std::chrono::steady_clock;
using test::RunGroupRanks;

std::vector<std::byte> Blob(uint32_t rank, uint32_t key, size_t len) {
  std::vector<std::byte> b(len);
  for (size_t i = 0; i < len; ++i) {
    b[i] = static_cast<std::byte>(rank * 31 + key * 7 + i);
  }
  return b;
}

// Members 0, 2 and 3 of four ranks: board ranks 0..2, every member's blob of each key.
TEST(GroupBoardTest, MembersSeeEveryMembersBlobOfAKey) {
  const std::vector<uint32_t> members{0, 2, 3};
  RunGroupRanks(4, [&](uint32_t rank, bootstrap::Group &group) {
    if (rank == 1) {
      return;  // not a member: never asked
    }
    GroupBoard board(group, members);
    EXPECT_EQ(board.nranks(), 3u);
    EXPECT_EQ(members[board.rank()], rank);
    for (uint32_t key : {1u, 2u}) {
      ASSERT_TRUE(board.Put(key, Blob(rank, key, 10 + rank)).ok());
      auto blobs = board.Wait(key, 64, Clock::now() + std::chrono::seconds(10), "test");
      ASSERT_TRUE(blobs.ok()) << blobs.status().message();
      for (uint32_t i = 0; i < 3; ++i) {
        const auto want = Blob(members[i], key, 10 + members[i]);
        const auto got = blobs->blob(i);
        EXPECT_EQ(std::vector<std::byte>(got.begin(), got.end()), want) << "member " << i;
      }
    }
    EXPECT_EQ(board.Put(1, Blob(rank, 1, 4)).code(), HCCL_E_INTERNAL);  // once per key
  });
}

TEST(GroupBoardTest, ABlobLargerThanTheStrideIsAnError) {
  RunGroupRanks(2, [&](uint32_t rank, bootstrap::Group &group) {
    GroupBoard board(group, {0, 1});
    ASSERT_TRUE(board.Put(5, Blob(rank, 5, rank == 1 ? 40 : 8)).ok());
    auto blobs = board.Wait(5, 16, Clock::now() + std::chrono::seconds(10), "test");
    if (rank == 0) {
      EXPECT_EQ(blobs.status().code(), HCCL_E_INTERNAL);
      EXPECT_NE(blobs.status().message().find("rank 1 published 40 bytes"), std::string::npos)
          << blobs.status().message();
    }
  });
}

// A rank that never publishes: the others' wait ends at the deadline naming it.
TEST(GroupBoardTest, AMissingBlobTimesOutNamingTheRank) {
  RunGroupRanks(2, [&](uint32_t rank, bootstrap::Group &group) {
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::seconds(2));
      return;
    }
    GroupBoard board(group, {0, 1});
    ASSERT_TRUE(board.Put(3, Blob(rank, 3, 8)).ok());
    auto blobs = board.Wait(3, 16, Clock::now() + std::chrono::milliseconds(500), "the test");
    EXPECT_EQ(blobs.status().code(), HCCL_E_TIMEOUT) << blobs.status().message();
    EXPECT_NE(blobs.status().message().find("the test"), std::string::npos);
    EXPECT_NE(blobs.status().message().find("rank 1"), std::string::npos)
        << blobs.status().message();
  });
}

// Link setup runs over the board: on this host (no RDMA device) every rank learns that the
// links are kernel-only, at once, without waiting for a timeout.
TEST(GroupBoardTest, LinkSetupOverTheBoardAgreesOnNoRdmaDevice) {
  RunGroupRanks(3, [&](uint32_t, bootstrap::Group &group) {
    GroupBoard board(group, {0, 1, 2});
    verbs::LinkOptions options;
    options.device = "hzc-no-such-rdma-device-anywhere";
    options.timeout = std::chrono::seconds(10);
    const auto start = Clock::now();
    auto links = verbs::Links::Establish(board, options);
    if (links.ok()) {
      EXPECT_EQ(*links, nullptr);
    } else {
      // A machine with RDMA devices but not this one: a clear error, the same on every rank.
      EXPECT_EQ(links.status().code(), HCCL_E_NOT_FOUND) << links.status().message();
    }
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  });
}

}  // namespace
}  // namespace hzc::transport
