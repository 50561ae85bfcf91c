// SPDX-License-Identifier: Apache-2.0
// Bounded spinning before a sleep, for waits on words that other processes write.
//
// A wait that spins catches a peer that is running within a few hundred nanoseconds, where a
// futex sleep and wake-up costs microseconds on each side; a wait that spins too long takes the
// CPU a peer needs when the ranks outnumber the CPUs. So: when every rank of the wait's group can
// have a CPU of its own, spin up to 50 us; else spin a few turns, then yield the CPU a few
// times. Then the caller sleeps (and checks what it checks only while waiting: peers' liveness,
// deadlines).
#pragma once

#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdint>

namespace hzc {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::atomic_signal_fence(std::memory_order_seq_cst);
#endif
}

// Whether @ranks processes of a group outnumber the CPUs this process may run on.
bool Oversubscribed(uint32_t ranks);

class SpinWait {
 public:
  static constexpr auto kSpinFor = std::chrono::microseconds(50);
  static constexpr int kShortSpins = 64;
  static constexpr int kYields = 16;

  explicit SpinWait(bool oversubscribed) : oversubscribed_(oversubscribed) {}

  // After a check that found nothing: pause (or yield) once and return true while the budget
  // lasts; false once it is spent (the caller sleeps).
  bool Again() {
    ++turns_;
    if (oversubscribed_) {
      if (turns_ <= kShortSpins) {
        CpuRelax();
        return true;
      }
      if (turns_ <= kShortSpins + kYields) {
        sched_yield();
        return true;
      }
      return false;
    }
    // The clock is read every 64 turns: a turn is a check and a pause (tens of nanoseconds).
    if (turns_ == 1) {
      until_ = std::chrono::steady_clock::now() + kSpinFor;
    } else if (turns_ % 64 == 0 && std::chrono::steady_clock::now() >= until_) {
      return false;
    }
    CpuRelax();
    return true;
  }
  // Start a new budget (after progress).
  void Reset() { turns_ = 0; }

 private:
  bool oversubscribed_;
  uint64_t turns_ = 0;
  std::chrono::steady_clock::time_point until_{};
};

}  // namespace hzc
