// SPDX-License-Identifier: Apache-2.0
// Prefetch for writing: ask for a cache line that other CPUs read, ahead of the stores that
// will need it, so that those stores find it owned instead of waiting at the head of this CPU's
// store buffer for it to come back (which stalls every later store behind them).
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace hzc {

// The line at @p, with the intent to write it (PREFETCHW where the CPU has it, cpuid
// 3DNowPrefetch; a no-op on an x86 without it).
inline void PrefetchForWrite(const void *p) {
#if defined(__x86_64__)
  static const bool has = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid(0x80000001, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_PRFCHW) != 0;
  }();
  if (has) {
    asm volatile("prefetchw %0" : : "m"(*static_cast<const char *>(p)));
  }
#else
  __builtin_prefetch(p, 1);
#endif
}

// Every line of [@p, @p + @bytes), for writing.
inline void PrefetchForWrite(const void *p, size_t bytes) {
  const auto *b = static_cast<const uint8_t *>(p);
  for (size_t at = 0; at < bytes; at += 64) {
    PrefetchForWrite(b + at);
  }
}

// Every line of [@p, @p + @bytes), for reading.
inline void PrefetchForRead(const void *p, size_t bytes) {
  const auto *b = static_cast<const uint8_t *>(p);
  for (size_t at = 0; at < bytes; at += 64) {
    __builtin_prefetch(b + at, 0);
  }
}

}  // namespace hzc
