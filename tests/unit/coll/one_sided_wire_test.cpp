// SPDX-License-Identifier: Apache-2.0
// The link offers of the one-sided calls (coll/one_sided_wire.h): which kind of link a pair takes
// from what each side can make, and what a peer's offer must be.
#include "coll/one_sided_wire.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "hzc_test.h"

namespace hzc::coll {
namespace {

using ::testing::HasSubstr;

constexpr uint32_t kBoth = kOverRdma | kOverTcp;

TEST(OneSidedWireTest, APairTakesRdmaWhenBothCanElseTcp) {
  EXPECT_EQ(*ChooseLink(kBoth, kBoth, 2), kOverRdma);
  EXPECT_EQ(*ChooseLink(kOverRdma, kBoth, 2), kOverRdma);
  EXPECT_EQ(*ChooseLink(kBoth, kOverRdma, 2), kOverRdma);
  // HZC_NET=auto with a device against socket, or auto without one: TCP on both sides.
  EXPECT_EQ(*ChooseLink(kBoth, kOverTcp, 2), kOverTcp);
  EXPECT_EQ(*ChooseLink(kOverTcp, kBoth, 2), kOverTcp);
  EXPECT_EQ(*ChooseLink(kOverTcp, kOverTcp, 2), kOverTcp);
}

TEST(OneSidedWireTest, APairWithNoKindInCommonFailsNamingBoth) {
  auto st = ChooseLink(kOverRdma, kOverTcp, 3);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().code(), HCCL_E_PARA);
  EXPECT_THAT(st.status().message(), HasSubstr("rank 3 links over TCP only"));
  EXPECT_THAT(st.status().message(), HasSubstr("this rank over RDMA only"));
  EXPECT_EQ(ChooseLink(kOverTcp, kOverRdma, 3).status().code(), HCCL_E_PARA);
}

TEST(OneSidedWireTest, AnOfferRoundTripsAndAnythingElseIsRefused) {
  for (uint32_t kinds : {kOverRdma, kOverTcp, kBoth}) {
    auto got = ParseOffer(Offer(kinds), 1);
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_EQ(*got, kinds);
  }
  auto refused = [](const std::vector<std::byte> &blob) {
    return ParseOffer(blob, 1).status().code() == HCCL_E_REMOTE;
  };
  EXPECT_TRUE(refused(Offer(0)));  // no kind
  EXPECT_TRUE(refused(Offer(4)));  // an unknown kind
  EXPECT_TRUE(refused({}));        // empty
  std::vector<std::byte> longer = Offer(kBoth);
  longer.push_back(std::byte{0});
  EXPECT_TRUE(refused(longer));  // a byte too many
  std::vector<std::byte> card = Offer(kBoth);
  ExchangeHeader h;
  std::memcpy(&h, card.data(), sizeof(h));
  h.has_link = ExchangeHeader::kRdmaCard;  // a card, not an offer
  std::memcpy(card.data(), &h, sizeof(h));
  EXPECT_TRUE(refused(card));
  h.has_link = ExchangeHeader::kOffer;
  h.magic = 0;  // not an exchange message
  std::memcpy(card.data(), &h, sizeof(h));
  EXPECT_TRUE(refused(card));
}

}  // namespace
}  // namespace hzc::coll
