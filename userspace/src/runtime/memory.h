// SPDX-License-Identifier: Apache-2.0
// aclrtMalloc / aclrtMallocHost memory on the host, and the checks of the copy and set calls.
//
// Device memory is an aclrtMalloc block or memory mapped by aclrtMapMem (runtime/vmm); host
// memory is everything else, aclrtMallocHost's blocks included. aclrtMalloc's pages:
//   NORMAL_ONLY(_P2P)         normal pages
//   HUGE_ONLY(_P2P)           hugetlb pages (MAP_HUGETLB) when the pool has them, else a
//                             2 MiB-aligned mapping with MADV_HUGEPAGE (transparent huge pages),
//                             as aclrtMallocPhysical does
//   HUGE_FIRST(_P2P)          as HUGE_ONLY above 1 MiB, normal pages up to 1 MiB (CANN's rule)
//   HUGE1G_ONLY(_P2P)         1 GiB hugetlb pages only (MAP_HUGE_1GB), else no memory
// Every block is its own anonymous mapping, registered process-wide until freed.
#pragma once

#include <acl/acl.h>

#include <cstddef>
#include <cstdint>

#include "base/status.h"

namespace hzc::runtime {

using AclStatus = BasicStatus<aclError>;

AclStatus Malloc(void **out, size_t size, uint32_t policy);
AclStatus Free(void *p);
AclStatus MallocHost(void **out, size_t size);
AclStatus FreeHost(void *p);

// Whether [p, p + size) lies in device memory (size > 0).
bool InDeviceMemory(const void *p, size_t size);

// The checks of aclrtMemcpy(dst, dest_max, src, count, kind); null pointers are checked before.
AclStatus CheckMemcpy(void *dst, size_t dest_max, const void *src, size_t count, int kind);
// The checks of aclrtMemset(p, max_count, value, count).
AclStatus CheckMemset(void *p, size_t max_count, size_t count);

// Free and total bytes of the host's memory (sysinfo(2)).
AclStatus MemInfo(int attr, size_t *free, size_t *total);

// For tests: the live blocks of aclrtMalloc and of aclrtMallocHost.
struct MemoryStats {
  size_t device_blocks = 0;
  size_t host_blocks = 0;
};
MemoryStats GetMemoryStats();

}  // namespace hzc::runtime
