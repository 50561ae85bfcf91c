// SPDX-License-Identifier: Apache-2.0
// A mutex biased towards one thread (as biased locking in language runtimes): the first thread
// that locks it becomes its favoured thread, which locks and unlocks it with plain stores and
// a compiler barrier (base/asymmetric_fence.h); any other thread takes an ordinary mutex,
// announces itself and runs HeavyFence() (a system call) before it waits for the favoured
// thread to leave. Made for state that one thread uses call after call (a communicator's
// collectives, called from the program's thread or its stream's) and that other threads may
// use now and then: correct for any number of threads, fast for the one.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

namespace hzc {

class BiasedLock {
 public:
  BiasedLock() = default;
  BiasedLock(const BiasedLock &) = delete;
  BiasedLock &operator=(const BiasedLock &) = delete;

  void lock();
  void unlock();

 private:
  // The calling thread's identity: the address of a thread_local (unique among live threads;
  // a new thread that reuses a dead favoured thread's address simply inherits its favour).
  static const void *Self();

  std::atomic<const void *> favoured_{nullptr};
  std::atomic<uint32_t> inside_{0};      // the favoured thread holds the lock through its path
  std::atomic<uint32_t> contenders_{0};  // threads on the mutex's path (holding or waiting)
  std::mutex mutex_;
  bool fast_ = false;  // how the holder took it (written and read by the holder only)
};

}  // namespace hzc
