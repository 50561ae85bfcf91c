// SPDX-License-Identifier: Apache-2.0
// Bounded spinning before a sleep, for waits on words that other processes write.
//
// A wait that spins catches a peer that is running within a few hundred nanoseconds, where a
// futex sleep and wake-up costs microseconds on each side; a wait that spins too long takes the
// CPU a peer needs when the ranks outnumber the CPUs, or when other work holds the CPUs. So:
// when every rank of the wait's group can have a CPU of its own, spin for the channel's budget
// (SpinBudget: up to 50 us, less when spinning did not pay lately); else spin a few turns, then
// yield the CPU a few times. Then the caller sleeps (and checks what it checks only while waiting:
// peers' liveness, deadlines).
#pragma once

#include <sched.h>

#include <algorithm>
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

// How long the waits of one channel (a control area, a communicator's pair channels) spin,
// adapted to how long its waits took lately (spinning and sleeping): a wait that ended within
// 50 us makes the budget at least four times what it took (spinning that long would have
// caught it), a longer one (a peer busy with a large copy, or not running: other work holds
// the CPUs) halves it, down to 2 us. So a wait spins long when the peers answer fast, and
// soon sleeps when they do not.
class SpinBudget {
 public:
  static constexpr std::chrono::nanoseconds kMin = std::chrono::microseconds(2);
  static constexpr std::chrono::nanoseconds kMax = std::chrono::microseconds(50);

  std::chrono::nanoseconds get() const { return ns_; }
  // A wait that took @took in all.
  void Waited(std::chrono::nanoseconds took) {
    ns_ = took <= kMax ? std::clamp(4 * took, ns_, kMax) : std::max(kMin, ns_ / 2);
  }

 private:
  std::chrono::nanoseconds ns_ = kMax;
};

class SpinWait {
 public:
  static constexpr int kShortSpins = 64;
  static constexpr int kYields = 16;

  // @budget: the spinning budget of the channel waited on (kept by the caller; null: a fixed
  // kMax); @oversubscribed: the ranks outnumber the CPUs.
  SpinWait(SpinBudget *budget, bool oversubscribed)
      : budget_(budget), oversubscribed_(oversubscribed) {}

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
      start_ = std::chrono::steady_clock::now();
    } else if (turns_ % 64 == 0 && std::chrono::steady_clock::now() - start_ >=
                                       (budget_ != nullptr ? budget_->get() : SpinBudget::kMax)) {
      return false;
    }
    CpuRelax();
    return true;
  }
  // The wait is over (a check found what it waited for, after spinning or after sleeping):
  // tell the budget how long it took. Waits that ended within 64 turns are not timed.
  void Done() {
    if (budget_ != nullptr && !oversubscribed_ && turns_ >= 64) {
      budget_->Waited(std::chrono::steady_clock::now() - start_);
    }
  }
  // Start anew (after progress).
  void Reset() { turns_ = 0; }

 private:
  SpinBudget *budget_;
  bool oversubscribed_;
  uint64_t turns_ = 0;
  std::chrono::steady_clock::time_point start_{};
};

}  // namespace hzc
