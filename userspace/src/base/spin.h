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

// Whether @ranks processes of a group outnumber the CPUs they may run on (this process's
// affinity, or the CPUs online when that is one CPU: a rank bound to a core of its own; read at
// the first call).
bool Oversubscribed(uint32_t ranks);

// How long the waits of one channel (a control area, a communicator's pair channels) spin,
// adapted to what spinning bought lately: a wait that caught its peer while spinning makes the
// budget at least four times what it took, up to 50 us; a wait whose spin ran out (the peer was
// busy with a large copy, or was not running) halves it, down to 20 us. So a wait spins long when
// the peers answer fast, and sooner sleeps when they do not. The floor is above what a sleeping
// peer takes to wake up (about 10 us here): with less, two ranks fall into a convoy where each
// sleeps until the other wakes it, every wait runs out and the budget never grows back.
class SpinBudget {
 public:
  static constexpr std::chrono::nanoseconds kMin = std::chrono::microseconds(20);
  static constexpr std::chrono::nanoseconds kMax = std::chrono::microseconds(50);

  std::chrono::nanoseconds get() const { return ns_; }
  void Caught(std::chrono::nanoseconds took) { ns_ = std::clamp(4 * took, ns_, kMax); }
  void RanOut() { ns_ = std::max(kMin, ns_ / 2); }

 private:
  std::chrono::nanoseconds ns_ = kMax;
};

class SpinWait {
 public:
  static constexpr int kShortSpins = 64;
  static constexpr int kYields = 16;
  static constexpr std::chrono::nanoseconds kYieldEvery = std::chrono::microseconds(5);

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
    // The clock is read every 64 turns from the 64th on (a turn is a check and a pause, tens of
    // nanoseconds; a clock read can take a hundred in a virtual machine): a short wait reads none.
    if (turns_ == 64) {
      start_ = std::chrono::steady_clock::now();
      yield_at_ = kYieldEvery;
    } else if (turns_ % 64 == 0) {
      const auto spent = std::chrono::steady_clock::now() - start_;
      if (spent >= (budget_ != nullptr ? budget_->get() : SpinBudget::kMax)) {
        if (budget_ != nullptr) {
          budget_->RanOut();
        }
        return false;
      }
      // A peer that shares this CPU (the scheduler put both there) runs only if this rank lets
      // it: yield now and then (a yield with nobody else to run returns at once).
      if (spent >= yield_at_) {
        yield_at_ += kYieldEvery;
        sched_yield();
      }
    }
    CpuRelax();
    return true;
  }
  // A check after Again() found what it waited for: tell the budget what the spin took. Spins
  // shorter than 64 turns are not timed (nor their first 64 turns).
  void Caught() {
    if (budget_ != nullptr && !oversubscribed_ && turns_ >= 64) {
      budget_->Caught(std::chrono::steady_clock::now() - start_);
    }
  }
  // Start anew (after progress).
  void Reset() { turns_ = 0; }

 private:
  SpinBudget *budget_;
  bool oversubscribed_;
  uint64_t turns_ = 0;
  std::chrono::steady_clock::time_point start_{};
  std::chrono::nanoseconds yield_at_{};
};

}  // namespace hzc
