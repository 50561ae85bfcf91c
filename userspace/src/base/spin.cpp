// SPDX-License-Identifier: Apache-2.0
#include "base/spin.h"

namespace hzc {

bool Oversubscribed(uint32_t ranks) {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (sched_getaffinity(0, sizeof(cpus), &cpus) != 0) {
    return false;
  }
  return ranks > static_cast<uint32_t>(CPU_COUNT(&cpus));
}

}  // namespace hzc
