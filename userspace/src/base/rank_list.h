// SPDX-License-Identifier: Apache-2.0
// How messages name a set of ranks: "0,2,5", in increasing order.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace hzc {

inline std::string RankList(std::span<const uint32_t> ranks) {
  return fmt::format("{}", fmt::join(ranks, ","));
}

// The ranks r < @nranks for which @pred(r) holds, as RankList writes them.
template <typename Pred>
std::string RanksWhere(uint32_t nranks, Pred pred) {
  std::vector<uint32_t> ranks;
  for (uint32_t r = 0; r < nranks; ++r) {
    if (pred(r)) {
      ranks.push_back(r);
    }
  }
  return RankList(ranks);
}

}  // namespace hzc
