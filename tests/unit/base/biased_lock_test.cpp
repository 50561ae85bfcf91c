// SPDX-License-Identifier: Apache-2.0
// BiasedLock: mutual exclusion between the favoured thread's lock-free path and the others'.
#include "base/biased_lock.h"

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "hzc_test.h"

namespace hzc {
namespace {

class BiasedLockTest : public test::Test {};

// The favoured thread (the first to lock) and three others increment a plain counter and check
// that nobody else is inside: no increment is lost and no two threads are ever inside at once.
TEST_F(BiasedLockTest, ExcludesTheFavouredThreadAndTheOthers) {
  BiasedLock lock;
  { std::lock_guard first(lock); }  // this thread is the favoured one
  uint64_t counter = 0;
  std::atomic<int> inside{0};
  std::atomic<bool> overlap{false};
  auto work = [&](int n) {
    for (int i = 0; i < n; ++i) {
      std::lock_guard g(lock);
      if (inside.fetch_add(1, std::memory_order_relaxed) != 0) {
        overlap = true;
      }
      ++counter;
      inside.fetch_sub(1, std::memory_order_relaxed);
    }
  };
  std::vector<std::thread> others;
  for (int t = 0; t < 3; ++t) {
    others.emplace_back(work, 2000);
  }
  work(200000);
  for (auto &t : others) {
    t.join();
  }
  EXPECT_FALSE(overlap.load());
  EXPECT_EQ(counter, 200000U + 3 * 2000U);
}

// Another thread waits while the favoured thread holds the lock, and gets it when it leaves.
TEST_F(BiasedLockTest, AnotherThreadWaitsForTheFavouredOne) {
  BiasedLock lock;
  lock.lock();
  std::atomic<bool> got{false};
  std::thread other([&] {
    std::lock_guard g(lock);
    got = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(got.load());
  lock.unlock();
  other.join();
  EXPECT_TRUE(got.load());
  std::lock_guard again(lock);  // the favoured thread's path still works after contention
}

}  // namespace
}  // namespace hzc
