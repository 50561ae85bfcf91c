// SPDX-License-Identifier: Apache-2.0
#include "transport/activation_cookie.h"

#include <array>
#include <cstdint>
#include <set>

#include "hzc_test.h"

namespace hzc::transport {
namespace {

using Domain = std::array<uint64_t, 2>;
using Match = ActivationCookie::Match;

class ActivationCookieTest : public test::Test {};

TEST_F(ActivationCookieTest, RoundTrip) {
  const Domain domain{0x0123456789abcdefULL, 0xfedcba9876543210ULL};
  for (uint32_t rank : {0U, 1U, 7U, 4095U}) {
    const uint32_t tag = ActivationCookie::Tag(domain, rank);
    for (uint32_t rkey : {0U, 1U, 0x1234U, 0x80000000U, UINT32_MAX}) {
      const uint64_t cookie = ActivationCookie::Encode(tag, rkey);
      EXPECT_NE(cookie, 0U) << "a registration must never look like no registration";
      EXPECT_EQ(cookie >> 32, tag);
      uint32_t got = ~rkey;
      EXPECT_EQ(ActivationCookie::Decode(cookie, tag, &got), Match::kOk);
      EXPECT_EQ(got, rkey);
    }
  }
}

TEST_F(ActivationCookieTest, ZeroMeansNoRegistration) {
  uint32_t rkey = 42;
  EXPECT_EQ(ActivationCookie::Decode(0, ActivationCookie::Tag({1, 2}, 0), &rkey), Match::kNone);
  EXPECT_EQ(rkey, 42U) << "untouched";
}

TEST_F(ActivationCookieTest, TagIsNeverZero) {
  // Domain ids are never all zero, but the fold must not produce 0 for any input.
  EXPECT_NE(ActivationCookie::Tag({0, 0}, 0), 0U);
  for (uint64_t i = 0; i < 100000; ++i) {
    ASSERT_NE(ActivationCookie::Tag({i, i * 0x9e3779b97f4a7c15ULL}, static_cast<uint32_t>(i % 9)),
              0U)
        << i;
  }
}

TEST_F(ActivationCookieTest, OtherCommunicatorOrRankIsRefused) {
  const Domain a{0x1111, 0x2222}, b{0x1111, 0x2223}, c{0x1112, 0x2222};
  const uint64_t cookie = ActivationCookie::Encode(ActivationCookie::Tag(a, 1), 0x77);
  uint32_t rkey = 0;
  EXPECT_EQ(ActivationCookie::Decode(cookie, ActivationCookie::Tag(a, 1), &rkey), Match::kOk);
  EXPECT_EQ(ActivationCookie::Decode(cookie, ActivationCookie::Tag(b, 1), &rkey), Match::kOther);
  EXPECT_EQ(ActivationCookie::Decode(cookie, ActivationCookie::Tag(c, 1), &rkey), Match::kOther);
  EXPECT_EQ(ActivationCookie::Decode(cookie, ActivationCookie::Tag(a, 0), &rkey), Match::kOther);
  EXPECT_EQ(ActivationCookie::Decode(cookie, ActivationCookie::Tag(a, 2), &rkey), Match::kOther);
}

TEST_F(ActivationCookieTest, TagsSpreadOverDomainsAndRanks) {
  // Nearby ids (one bit or one rank apart) must give distinct tags.
  std::set<uint32_t> tags;
  size_t made = 0;
  for (uint64_t i = 0; i < 64; ++i) {
    for (uint32_t rank = 0; rank < 16; ++rank) {
      tags.insert(ActivationCookie::Tag({1ULL << i, 0}, rank));
      tags.insert(ActivationCookie::Tag({0, 1ULL << i}, rank));
      made += 2;
    }
  }
  EXPECT_EQ(tags.size(), made);
}

TEST_F(ActivationCookieTest, UsableAtCompileTime) {
  constexpr uint32_t kTag = ActivationCookie::Tag({3, 4}, 5);
  static_assert(kTag != 0);
  static_assert(ActivationCookie::Encode(kTag, 9) == ((uint64_t{kTag} << 32) | 9));
}

}  // namespace
}  // namespace hzc::transport
