// SPDX-License-Identifier: Apache-2.0
// The start-up of a rank process (the rank binaries that rank_launch.h starts): its command line
// ROOT_INFO_HEX NRANKS RANK SCENARIO [MORE...], the scenario it names, and the communicator's
// destroy at the end.
#pragma once

#include <hccl/hccl.h>

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "root_info_hex.h"

namespace hzc::test {

struct RankArgs {
  HcclRootInfo root{};
  uint32_t nranks = 0;
  uint32_t rank = 0;
  std::string scenario;
  std::vector<std::string> more;  // the arguments after SCENARIO
};

// Parse ROOT_INFO_HEX NRANKS RANK SCENARIO and @min_more to @max_more more arguments into @out;
// false when the count or the root info is wrong.
inline bool ParseRankArgs(int argc, char **argv, int min_more, int max_more, RankArgs *out) {
  if (argc < 5 + min_more || argc > 5 + max_more || !RootInfoFromHex(argv[1], &out->root)) {
    return false;
  }
  out->nranks = static_cast<uint32_t>(std::atoi(argv[2]));
  out->rank = static_cast<uint32_t>(std::atoi(argv[3]));
  out->scenario = argv[4];
  out->more.assign(argv + 5, argv + argc);
  return true;
}

// Run the scenario @name of @scenarios: its exit status, @unknown when there is none.
inline int RunScenario(const std::map<std::string, std::function<int()>> &scenarios,
                       const std::string &name, int unknown) {
  auto it = scenarios.find(name);
  return it != scenarios.end() ? it->second() : unknown;
}

// Destroy @comm (unless null) after a scenario that exited with @rc: @rc, or @failed when the
// scenario succeeded and the destroy did not.
inline int DestroyAfter(HcclComm comm, int rc, int failed) {
  if (comm != nullptr && HcclCommDestroy(comm) != HCCL_SUCCESS && rc == 0) {
    return failed;
  }
  return rc;
}

}  // namespace hzc::test
