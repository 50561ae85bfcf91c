// SPDX-License-Identifier: Apache-2.0
// Futex wait and wake on a 32-bit word that may live in memory shared between processes
// (a memfd mapped MAP_SHARED), so the calls are not FUTEX_PRIVATE_FLAG.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace hzc {

// Sleep while *@word holds @expected, at most @timeout. 0 when woken; -1 with errno EAGAIN (the
// word had changed already), ETIMEDOUT or EINTR otherwise. Callers check their condition again
// either way.
int FutexWait(uint32_t *word, uint32_t expected, std::chrono::nanoseconds timeout);
// Wake every waiter on @word.
void FutexWake(uint32_t *word);

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
inline int FutexWait(std::atomic<uint32_t> *word, uint32_t expected,
                     std::chrono::nanoseconds timeout) {
  return FutexWait(reinterpret_cast<uint32_t *>(word), expected, timeout);
}
inline void FutexWake(std::atomic<uint32_t> *word) {
  FutexWake(reinterpret_cast<uint32_t *>(word));
}

}  // namespace hzc
