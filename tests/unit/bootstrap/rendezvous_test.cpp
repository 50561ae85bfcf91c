// SPDX-License-Identifier: Apache-2.0
// The TCP rendezvous on loopback, with ranks as threads.
#include "bootstrap/rendezvous.h"

#include <future>
#include <thread>
#include <vector>

#include "hzc_test.h"

namespace hzc::bootstrap {
namespace {

using std::chrono::seconds;
using ::testing::HasSubstr;

class RendezvousTest : public test::Test {
 protected:
  void TearDown() override {
    // The root thread closes its sockets right after answering; give it a moment.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    test::Test::TearDown();
  }

  std::vector<Expected<std::vector<RankIdentity>>> RunRanks(const RootInfo &root, uint32_t nranks,
                                                            std::vector<uint32_t> ranks,
                                                            seconds timeout) {
    std::vector<std::future<Expected<std::vector<RankIdentity>>>> futures;
    for (uint32_t r : ranks) {
      futures.push_back(std::async(std::launch::async, [=] {
        return Join(root, nranks, r, RankIdentity{"host-" + std::to_string(r % 2), 1000 + r},
                    timeout);
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
    }
  }
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
    return Join(*root, 2, 0, RankIdentity{"h", 1}, seconds(1));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto late = Join(*root, 3, 1, RankIdentity{"h", 2}, seconds(1));
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
    return Join(*root, 2, 0, RankIdentity{"h", 1}, seconds(5));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto dup = Join(*root, 2, 0, RankIdentity{"h", 2}, seconds(5));
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.status().code(), HCCL_E_PARA);
  EXPECT_THAT(dup.status().message(), HasSubstr("rank=0 is out of range or already joined"));
  auto second = Join(*root, 2, 1, RankIdentity{"h", 3}, seconds(5));
  EXPECT_TRUE(second.ok()) << second.status().message();
  EXPECT_TRUE(first.get().ok());
}

TEST_F(RendezvousTest, UnreachableRootIsTcpConnectError) {
  auto root = StartRoot("127.0.0.1", seconds(1));
  ASSERT_TRUE(root.ok());
  RootInfo wrong = *root;
  reinterpret_cast<sockaddr_in *>(&wrong.addr)->sin_port = htons(1);  // nobody listens
  auto r = Join(wrong, 1, 0, RankIdentity{"h", 1}, seconds(0));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), HCCL_E_TCP_CONNECT);
  EXPECT_THAT(r.status().message(), HasSubstr("127.0.0.1:1"));
  // Let the real root serve its rank so its thread ends.
  EXPECT_TRUE(Join(*root, 1, 0, RankIdentity{"h", 1}, seconds(2)).ok());
}

TEST_F(RendezvousTest, BadAddress) {
  auto root = StartRoot("not-an-ip", seconds(1));
  ASSERT_FALSE(root.ok());
  EXPECT_EQ(root.status().code(), HCCL_E_PARA);
}

}  // namespace
}  // namespace hzc::bootstrap
