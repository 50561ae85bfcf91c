// SPDX-License-Identifier: Apache-2.0
#include "base/spin.h"

#include <unistd.h>

namespace hzc {

namespace {

// CPUs the ranks of this process's job may run on, read once (system calls); 0 when unknown:
// this process's affinity, unless it is a single CPU, which is a binding of this rank (as
// mpirun --bind-to core and hzc-perf --bind make), not a limit of the job: then the CPUs online.
uint32_t Cpus() {
  static const uint32_t cpus = [] {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) != 0) {
      return 0U;
    }
    const auto mine = static_cast<uint32_t>(CPU_COUNT(&set));
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    return mine == 1 && online > 0 ? static_cast<uint32_t>(online) : mine;
  }();
  return cpus;
}

}  // namespace

bool Oversubscribed(uint32_t ranks) {
  return Cpus() != 0 && ranks > Cpus();
}

}  // namespace hzc
