// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/wait_fd.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>

#include "base/errno_string.h"

namespace hzc::bootstrap {

int RemainingMs(std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, INT_MAX));
}

Expected<bool> WaitFd(int fd, short events, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    pollfd p{.fd = fd, .events = events, .revents = 0};
    const int n = ::poll(&p, 1, RemainingMs(deadline));
    if (n > 0) {
      return true;
    }
    if (n == 0) {
      return false;
    }
    if (errno != EINTR) {
      return Error(HCCL_E_SYSCALL, "poll failed: {}", ErrnoString(errno));
    }
  }
}

}  // namespace hzc::bootstrap
