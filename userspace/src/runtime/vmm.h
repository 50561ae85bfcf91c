// SPDX-License-Identifier: Apache-2.0
// Host implementation of the ACL virtual-memory calls.
//
//   reservation  a PROT_NONE, MAP_NORESERVE anonymous mapping; at an address the library
//                picks (no expectPtr) its base is aligned to 1 GiB when it is at least 1 GiB
//                long, else to 2 MiB, whatever the flags: a mapping's address must be a multiple
//                of its allocation's granularity (2 MiB huge, 1 GiB ACL_HBM_MEM_HUGE1G), and
//                the caller cannot ask for an alignment (aclrtReserveMemAddress's is reserved).
//                An expectPtr is taken as given: aligned to the page (flags 0) or 2 MiB (1).
//   physical     a memfd (hugetlb for huge-page attributes when the pool has pages, else a
//                plain memfd with transparent huge pages requested), allocated eagerly and
//                sealed against shrinking (F_SEAL_SHRINK: peers map it, transport/memfd.h)
//   mapping      the whole memfd mapped MAP_SHARED|MAP_FIXED into a reservation
//
// Mappings keep their physical allocation alive, so aclrtFreePhysical only drops the handle.
#pragma once

#include <acl/acl.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace hzc::runtime {

using AclStatus = BasicStatus<aclError>;

inline constexpr size_t kHugePageSize = size_t{2} << 20;
inline constexpr size_t kGiantPageSize = size_t{1} << 30;

// Granularity of allocations with @prop (validated: memAttr known).
AclStatus Granularity(const aclrtPhysicalMemProp &prop, aclrtMemGranularityOptions option,
                      size_t *out);

AclStatus Reserve(void **out, size_t size, void *expect, uint64_t flags);
AclStatus Release(void *base);
AclStatus MallocPhysical(aclrtDrvMemHandle *out, size_t size, const aclrtPhysicalMemProp &prop);
AclStatus FreePhysical(aclrtDrvMemHandle handle);
AclStatus Map(void *va, size_t size, aclrtDrvMemHandle handle);
AclStatus Unmap(void *va);

// For HcclCommActivateCommMemory: is @handle a live allocation of @size bytes mapped at @va?
// Empty string if so, else why not.
std::string CheckMapped(void *va, size_t size, aclrtDrvMemHandle handle);

// One aclrtMapMem mapping: its address, its size and the live handle of its allocation
// (nullptr once aclrtFreePhysical dropped it).
struct MappedBlock {
  uintptr_t va = 0;
  size_t size = 0;
  aclrtDrvMemHandle handle = nullptr;
};
// The mappings that cover [p, p + size), the first starting at @p and each starting where the
// one before ends; empty when @p starts no mapping or a gap comes before p + size.
std::vector<MappedBlock> MappingsFrom(const void *p, size_t size);

// Keep the mapping that starts at @va from aclrtUnmapMem, which fails with
// ACL_ERROR_RT_PARAM_INVALID and @why until ReleaseMapping (a symmetric window lives on it);
// false when no mapping starts at @va. aclrtFreePhysical is not affected: the mapping keeps its
// allocation.
bool HoldMapping(const void *va, std::string why);
void ReleaseMapping(const void *va);

// The memfd of the allocation mapped at @va (the start of an aclrtMapMem mapping), -1 when none
// is. The descriptor stays the allocation's: valid while it is mapped; duplicate it to keep it.
int PhysicalFdAt(const void *va);

// Whether [p, p + size) lies in memory mapped by aclrtMapMem (one mapping, or mappings that
// follow each other without a gap), size > 0.
bool InMappedMemory(const void *p, size_t size);

// Counters for tests.
struct Stats {
  size_t reservations = 0;
  size_t live_handles = 0;
  size_t physical_objects = 0;  // including freed handles still mapped somewhere
  size_t mappings = 0;
};
Stats GetStats();

}  // namespace hzc::runtime
