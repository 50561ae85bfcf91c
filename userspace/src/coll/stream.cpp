// SPDX-License-Identifier: Apache-2.0
#include "coll/stream.h"

#include <cstdint>
#include <mutex>
#include <set>

namespace hzc::coll {

namespace {

// Handles are opaque, never reused values that do not point at memory.
constexpr uintptr_t kBase = uintptr_t{0x53} << 40;

std::mutex g_mutex;
std::set<uintptr_t> g_streams;
uint64_t g_made = 0;

}  // namespace

aclrtStream CreateStream() {
  std::lock_guard lock(g_mutex);
  const uintptr_t h = kBase + (++g_made) * 0x40;
  g_streams.insert(h);
  return reinterpret_cast<aclrtStream>(h);
}

bool DestroyStream(aclrtStream stream) {
  std::lock_guard lock(g_mutex);
  return g_streams.erase(reinterpret_cast<uintptr_t>(stream)) == 1;
}

bool IsStream(aclrtStream stream) {
  std::lock_guard lock(g_mutex);
  return g_streams.count(reinterpret_cast<uintptr_t>(stream)) == 1;
}

size_t StreamCount() {
  std::lock_guard lock(g_mutex);
  return g_streams.size();
}

}  // namespace hzc::coll
