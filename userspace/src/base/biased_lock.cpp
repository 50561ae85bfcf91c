// SPDX-License-Identifier: Apache-2.0
#include "base/biased_lock.h"

#include <chrono>

#include "base/asymmetric_fence.h"
#include "base/futex.h"

namespace hzc {

const void *BiasedLock::Self() {
  thread_local const char self = 0;
  return &self;
}

void BiasedLock::lock() {
  const void *me = Self();
  const void *favoured = favoured_.load(std::memory_order_relaxed);
  if (favoured == nullptr) {
    favoured_.compare_exchange_strong(favoured, me, std::memory_order_relaxed);
    favoured = favoured_.load(std::memory_order_relaxed);
  }
  if (favoured == me) {
    inside_.store(1, std::memory_order_relaxed);
    LightFence();  // "inside" before "anybody coming?" (a contender's HeavyFence pairs with it)
    if (contenders_.load(std::memory_order_acquire) == 0) {
      fast_ = true;
      return;
    }
    inside_.store(0, std::memory_order_release);
    FutexWake(&inside_);  // a contender may sleep on it (rare path)
  }
  mutex_.lock();
  contenders_.fetch_add(1, std::memory_order_seq_cst);
  HeavyFence();  // from here on the favoured thread sees a contender, or we see it inside
  while (inside_.load(std::memory_order_acquire) != 0) {
    FutexWait(&inside_, 1, std::chrono::milliseconds(1));
  }
  fast_ = false;
}

void BiasedLock::unlock() {
  if (fast_) {
    inside_.store(0, std::memory_order_release);
    // A contender sleeps at most one slice of its FutexWait when it misses this store: the
    // favoured path stays free of system calls and locked instructions.
    if (contenders_.load(std::memory_order_relaxed) != 0) {
      FutexWake(&inside_);
    }
    return;
  }
  contenders_.fetch_sub(1, std::memory_order_release);
  mutex_.unlock();
}

}  // namespace hzc
