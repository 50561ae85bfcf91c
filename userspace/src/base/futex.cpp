// SPDX-License-Identifier: Apache-2.0
#include "base/futex.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <ctime>

namespace hzc {

int FutexWait(uint32_t *word, uint32_t expected, std::chrono::nanoseconds timeout) {
  if (timeout < std::chrono::nanoseconds::zero()) {
    timeout = std::chrono::nanoseconds::zero();
  }
  const timespec ts{.tv_sec = static_cast<time_t>(timeout.count() / 1000000000),
                    .tv_nsec = static_cast<long>(timeout.count() % 1000000000)};
  return static_cast<int>(::syscall(SYS_futex, word, FUTEX_WAIT, expected, &ts, nullptr, 0));
}

void FutexWake(uint32_t *word) {
  ::syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace hzc
