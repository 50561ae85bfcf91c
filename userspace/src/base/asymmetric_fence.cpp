// SPDX-License-Identifier: Apache-2.0
#include "base/asymmetric_fence.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>

#include "base/log.h"

namespace hzc {

namespace {

long Membarrier(int cmd) {
  return syscall(SYS_membarrier, cmd, 0U, 0);
}

bool Register() {
  const long cmds = Membarrier(MEMBARRIER_CMD_QUERY);
  if (cmds < 0 || (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) {
    LogDebug("membarrier: no MEMBARRIER_CMD_PRIVATE_EXPEDITED; calls take full fences");
    return false;
  }
  if (Membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) != 0) {
    LogDebug("membarrier: registration refused; calls take full fences");
    return false;
  }
  return true;
}

}  // namespace

namespace fence_detail {

bool Expedited() {
  static const bool expedited = Register();
  return expedited;
}

}  // namespace fence_detail

void HeavyFence() {
  if (!fence_detail::Expedited()) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return;
  }
  // The registration belongs to the memory: a child of fork() has it, exec drops it (a new
  // program registers again at its first fence). Registered again should the kernel say it is
  // not; if the command still fails, no light side may be trusted: there is no safe way on, and
  // a silent race would be worse.
  if (Membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0 &&
      (Membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) != 0 ||
       Membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0)) {
    LogError("membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) failed after registration; aborting");
    std::abort();
  }
}

}  // namespace hzc
