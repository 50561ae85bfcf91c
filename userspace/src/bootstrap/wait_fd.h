// SPDX-License-Identifier: Apache-2.0
// Waiting for a socket of a rendezvous or hand-off until a deadline.
#pragma once

#include <chrono>

#include "base/status.h"

namespace hzc::bootstrap {

// Milliseconds left until @deadline, 0 when it passed (a poll timeout).
int RemainingMs(std::chrono::steady_clock::time_point deadline);

// Wait for @events on @fd until @deadline (retrying after signals): true if ready, false on
// the deadline, HCCL_E_SYSCALL when poll fails.
Expected<bool> WaitFd(int fd, short events, std::chrono::steady_clock::time_point deadline);

}  // namespace hzc::bootstrap
