// SPDX-License-Identifier: Apache-2.0
// Synchronisation of test ranks that are separate processes: a page of counters in a memfd
// the launcher creates and its children inherit (the descriptor number is passed on the
// command line). Every wait has a deadline, so a dead rank never hangs the others.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

namespace hzc::test {

struct SharedSync {
  static constexpr int kSlots = 64;
  std::atomic<uint32_t> arrived[kSlots];
  std::atomic<uint32_t> flags[kSlots];

  // A fresh page in a memfd that is inherited across exec; *fd receives its descriptor.
  static SharedSync *Create(int *fd) {
    *fd = memfd_create("hzc-test-sync", 0);
    if (*fd < 0 || ftruncate(*fd, sizeof(SharedSync)) != 0) {
      return nullptr;
    }
    return Attach(*fd);
  }
  static SharedSync *Attach(int fd) {
    void *p = mmap(nullptr, sizeof(SharedSync), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    return p == MAP_FAILED ? nullptr : static_cast<SharedSync *>(p);
  }
  static void Detach(SharedSync *s) { munmap(s, sizeof(SharedSync)); }

  // Wait until @pred() or @timeout; true if @pred() held.
  template <typename Pred>
  static bool WaitFor(Pred pred, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!pred()) {
      if (std::chrono::steady_clock::now() > deadline) {
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
  }

  // Arrive at barrier @slot and wait until @n parties have.
  bool Barrier(int slot, uint32_t n, std::chrono::milliseconds timeout) {
    arrived[slot].fetch_add(1);
    return WaitFor([&] { return arrived[slot].load() >= n; }, timeout);
  }
};

}  // namespace hzc::test
