// SPDX-License-Identifier: Apache-2.0
// The global counters of hzc.ko in /sys/kernel/hzc that a test must leave as it found them.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <map>
#include <string>
#include <thread>

namespace hzc::test {

inline std::map<std::string, long> KernelCounters() {
  std::map<std::string, long> out;
  for (const char *name : {"nr_ranges", "nr_activations", "pinned_bytes", "nr_domains"}) {
    std::ifstream f(std::string("/sys/kernel/hzc/") + name);
    long v = -1;
    f >> v;
    out[name] = v;
  }
  return out;
}

// Expect the counters back at @baseline within @grace (a dead process's context is released
// when its last file reference drops, shortly after it is reaped).
inline void ExpectKernelBaseline(
    const std::map<std::string, long> &baseline,
    std::chrono::milliseconds grace = std::chrono::milliseconds(5000)) {
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (KernelCounters() != baseline && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (const auto &[name, v] : KernelCounters()) {
    EXPECT_EQ(v, baseline.at(name)) << "/sys/kernel/hzc/" << name << " is not back at its baseline";
  }
}

}  // namespace hzc::test
