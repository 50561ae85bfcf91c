// SPDX-License-Identifier: Apache-2.0
// What the scenarios of hzc-coll-rank share (coll_rank.cpp, exchange_rank.cpp): the rank's
// communicator and the arena its buffers live in.
#pragma once

#include <acl/acl.h>
#include <hccl/hccl.h>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace hzc::coll_rank {

inline uint32_t g_rank = 0, g_n = 0;
inline HcclComm g_comm = nullptr;
inline bool g_zero_copy = false;

constexpr size_t kGuard = 64;
constexpr uint8_t kGuardByte = 0xa5;

// One arena for all buffers: activated memory (zerocopy) or plain memory (staging).
struct Arena {
  uint8_t *base = nullptr;
  size_t size = 0;
  void *va = nullptr;
  aclrtDrvMemHandle handle = nullptr;
  bool ok = false;

  Arena(size_t bytes, bool zero_copy) {
    if (!zero_copy) {
      size = bytes;
      base = static_cast<uint8_t *>(std::malloc(bytes));
      ok = base != nullptr;
      return;
    }
    aclrtPhysicalMemProp prop{};
    prop.memAttr = ACL_HBM_MEM_NORMAL;
    prop.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
    size_t gran = 0;
    if (aclrtMemGetAllocationGranularity(&prop, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &gran) !=
        ACL_SUCCESS) {
      return;
    }
    size = (bytes + gran - 1) / gran * gran;
    ok = aclrtReserveMemAddress(&va, size, 0, nullptr, 0) == ACL_SUCCESS &&
         HcclCommSetMemoryRange(g_comm, va, size, 0, 0) == HCCL_SUCCESS &&
         aclrtMallocPhysical(&handle, size, &prop, 0) == ACL_SUCCESS &&
         aclrtMapMem(va, size, 0, handle, 0) == ACL_SUCCESS &&
         HcclCommActivateCommMemory(g_comm, va, size, 0, handle, 0) == HCCL_SUCCESS;
    base = static_cast<uint8_t *>(va);
  }
  ~Arena() {
    if (va == nullptr) {
      std::free(base);
      return;
    }
    HcclCommDeactivateCommMemory(g_comm, va);
    aclrtUnmapMem(va);
    aclrtFreePhysical(handle);
    HcclCommUnsetMemoryRange(g_comm, va);
    aclrtReleaseMemAddress(va);
  }
};

// The exchange scenarios (exchange_rank.cpp): the exit status of @scenario, or -1 when it is
// not one of them.
int ExchangeScenario(const std::string &scenario);

}  // namespace hzc::coll_rank
