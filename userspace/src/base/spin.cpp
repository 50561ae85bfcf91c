// SPDX-License-Identifier: Apache-2.0
#include "base/spin.h"

namespace hzc {

namespace {

// CPUs this process may run on, read once (a system call); 0 when unknown.
uint32_t Cpus() {
  static const uint32_t cpus = [] {
    cpu_set_t set;
    CPU_ZERO(&set);
    return sched_getaffinity(0, sizeof(set), &set) == 0 ? static_cast<uint32_t>(CPU_COUNT(&set))
                                                        : 0;
  }();
  return cpus;
}

}  // namespace

bool Oversubscribed(uint32_t ranks) {
  return Cpus() != 0 && ranks > Cpus();
}

}  // namespace hzc
