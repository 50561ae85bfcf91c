// SPDX-License-Identifier: Apache-2.0
// Memory as HCCL's symmetric-memory programs set it up for a window: a reservation
// (aclrtReserveMemAddress) with physical allocations mapped into it (aclrtMallocPhysical,
// aclrtMapMem), all released at the end of its scope.
#pragma once

#include <acl/acl.h>

#include <cstddef>
#include <vector>

namespace hzc::test {

constexpr size_t kMappedBlock = 256 << 10;

// A reservation of @n blocks of @block bytes with the first @mapped of them mapped (aclrtMapMem),
// each its own physical allocation: HCCL's symmetric-memory set-up.
struct Mapped {
  size_t block = kMappedBlock;
  void *va = nullptr;
  std::vector<aclrtDrvMemHandle> handles;
  std::vector<bool> is_mapped;

  Mapped() = default;
  Mapped(const Mapped &) = delete;
  Mapped &operator=(const Mapped &) = delete;

  bool Make(size_t n, size_t mapped, size_t bytes = kMappedBlock) {
    block = bytes;
    aclrtPhysicalMemProp prop{};
    prop.memAttr = ACL_HBM_MEM_NORMAL;
    prop.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
    if (aclrtReserveMemAddress(&va, n * block, 0, nullptr, 0) != ACL_SUCCESS) {
      return false;
    }
    for (size_t i = 0; i < mapped; ++i) {
      aclrtDrvMemHandle h = nullptr;
      if (aclrtMallocPhysical(&h, block, &prop, 0) != ACL_SUCCESS ||
          aclrtMapMem(At(i), block, 0, h, 0) != ACL_SUCCESS) {
        return false;
      }
      handles.push_back(h);
      is_mapped.push_back(true);
    }
    return true;
  }
  // @n blocks of @bytes, every one a mapping of the same allocation (as a window's memory
  // counts: the bytes mapped, however little physical memory backs them).
  bool MakeAliased(size_t n, size_t bytes) {
    block = bytes;
    aclrtPhysicalMemProp prop{};
    prop.memAttr = ACL_HBM_MEM_NORMAL;
    prop.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
    aclrtDrvMemHandle h = nullptr;
    if (aclrtReserveMemAddress(&va, n * block, 0, nullptr, 0) != ACL_SUCCESS ||
        aclrtMallocPhysical(&h, block, &prop, 0) != ACL_SUCCESS) {
      return false;
    }
    handles.push_back(h);
    for (size_t i = 0; i < n; ++i) {
      if (aclrtMapMem(At(i), block, 0, h, 0) != ACL_SUCCESS) {
        return false;
      }
      is_mapped.push_back(true);
    }
    return true;
  }
  char *At(size_t i) const { return static_cast<char *>(va) + i * block; }
  ~Mapped() {
    for (size_t i = 0; i < is_mapped.size(); ++i) {
      if (is_mapped[i]) {
        aclrtUnmapMem(At(i));
      }
    }
    for (aclrtDrvMemHandle h : handles) {
      if (h != nullptr) {
        aclrtFreePhysical(h);
      }
    }
    if (va != nullptr) {
      aclrtReleaseMemAddress(va);
    }
  }
};

}  // namespace hzc::test
