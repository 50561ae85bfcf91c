// SPDX-License-Identifier: Apache-2.0
// The buffers of a test rank: one arena of activated memory (set as a range of @comm,
// physical memory mapped and activated), or of plain memory for the staging path.
#pragma once

#include <acl/acl.h>
#include <hccl/hccl.h>

#include <cstdint>
#include <cstdlib>

namespace hzc::test {

struct Arena {
  HcclComm comm = nullptr;
  uint8_t *base = nullptr;
  size_t size = 0;
  void *va = nullptr;
  aclrtDrvMemHandle handle = nullptr;
  bool ok = false;

  Arena(HcclComm c, size_t bytes, bool zero_copy) : comm(c) {
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
         HcclCommSetMemoryRange(comm, va, size, 0, 0) == HCCL_SUCCESS &&
         aclrtMallocPhysical(&handle, size, &prop, 0) == ACL_SUCCESS &&
         aclrtMapMem(va, size, 0, handle, 0) == ACL_SUCCESS &&
         HcclCommActivateCommMemory(comm, va, size, 0, handle, 0) == HCCL_SUCCESS;
    base = static_cast<uint8_t *>(va);
  }
  ~Arena() {
    if (va == nullptr) {
      std::free(base);
      return;
    }
    HcclCommDeactivateCommMemory(comm, va);
    aclrtUnmapMem(va);
    aclrtFreePhysical(handle);
    HcclCommUnsetMemoryRange(comm, va);
    aclrtReleaseMemAddress(va);
  }
  Arena(const Arena &) = delete;
  Arena &operator=(const Arena &) = delete;
};

}  // namespace hzc::test
