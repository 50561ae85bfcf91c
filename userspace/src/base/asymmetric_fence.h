// SPDX-License-Identifier: Apache-2.0
// An asymmetric memory barrier (as liburcu's membarrier flavour and the kernel's sys_membarrier
// document): the frequent side of a Dekker-style handshake ("I am inside" stored, then "is
// anybody coming?" loaded) pays a compiler barrier only, and the rare side (the one that comes)
// makes every running thread of the process execute a full barrier with
// membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED). The frequent side then never executes a locked
// instruction, which on x86 would wait for its earlier stores to reach other CPUs (a call's
// writes to lines its peers read: a cross-CPU round trip per call).
//
// Where the kernel lacks the command (before Linux 4.14, or a seccomp filter refuses it), the
// light side is a full fence (std::atomic_thread_fence(seq_cst)) and the heavy side nothing:
// slower, as correct. The choice is made once per process, before the first light fence.
#pragma once

#include <atomic>

namespace hzc {

namespace fence_detail {
// Whether HeavyFence() issues membarrier (so that LightFence() may be a compiler barrier).
bool Expedited();
}  // namespace fence_detail

// The frequent side: orders this thread's earlier stores before its later loads as seen by a
// thread that runs HeavyFence() between its own store and load.
inline void LightFence() {
  static const bool expedited = fence_detail::Expedited();
  if (expedited) {
    std::atomic_signal_fence(std::memory_order_seq_cst);
  } else {
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
}

// The rare side: a full barrier on every thread of this process (a system call, a few
// microseconds).
void HeavyFence();

}  // namespace hzc
