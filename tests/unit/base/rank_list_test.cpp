// SPDX-License-Identifier: Apache-2.0
#include "base/rank_list.h"

#include <set>
#include <vector>

#include "hzc_test.h"

namespace hzc {
namespace {

TEST(RankListTest, CommaSeparatedInTheGivenOrder) {
  EXPECT_EQ(RankList({}), "");
  EXPECT_EQ(RankList(std::vector<uint32_t>{7}), "7");
  EXPECT_EQ(RankList(std::vector<uint32_t>{0, 2, 5}), "0,2,5");
}

TEST(RankListTest, RanksWhereListsTheRanksThatMatchInIncreasingOrder) {
  const std::set<uint32_t> joined = {1, 3};
  EXPECT_EQ(RanksWhere(5, [&](uint32_t r) { return !joined.contains(r); }), "0,2,4");
  EXPECT_EQ(RanksWhere(5, [](uint32_t) { return false; }), "");
  EXPECT_EQ(RanksWhere(0, [](uint32_t) { return true; }), "");
}

}  // namespace
}  // namespace hzc
