/* SPDX-License-Identifier: Apache-2.0 */
/*
 * acl/acl_rt.h: the subset of the ACL runtime that libhzc implements on host memory:
 * the virtual-memory calls (reserve a VA range, allocate "physical" memory, map it).
 *
 * Host semantics: a reservation is a PROT_NONE mapping; physical memory is a memfd
 * (hugetlb or transparent huge pages for the huge-page attributes); aclrtMapMem maps the
 * memfd MAP_SHARED|MAP_FIXED into a reservation; aclrtUnmapMem restores PROT_NONE.
 */
#ifndef ACL_ACL_RT_H_
#define ACL_ACL_RT_H_

#include <acl/acl_base.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef void *aclrtDrvMemHandle;

typedef enum aclrtMemAttr {
  ACL_DDR_MEM,
  ACL_HBM_MEM,
  ACL_DDR_MEM_HUGE,
  ACL_DDR_MEM_NORMAL,
  ACL_HBM_MEM_HUGE,
  ACL_HBM_MEM_NORMAL,
  ACL_DDR_MEM_P2P_HUGE,
  ACL_DDR_MEM_P2P_NORMAL,
  ACL_HBM_MEM_P2P_HUGE,
  ACL_HBM_MEM_P2P_NORMAL,
  ACL_HBM_MEM_HUGE1G,
  ACL_HBM_MEM_P2P_HUGE1G,
} aclrtMemAttr;

typedef enum aclrtMemLocationType {
  ACL_MEM_LOCATION_TYPE_HOST = 0,
  ACL_MEM_LOCATION_TYPE_DEVICE,
  ACL_MEM_LOCATION_TYPE_UNREGISTERED,
} aclrtMemLocationType;

typedef struct aclrtMemLocation {
  uint32_t id;
  aclrtMemLocationType type;
} aclrtMemLocation;

typedef enum aclrtMemAllocationType {
  ACL_MEM_ALLOCATION_TYPE_PINNED = 0,
} aclrtMemAllocationType;

typedef enum aclrtMemHandleType {
  ACL_MEM_HANDLE_TYPE_NONE = 0,
} aclrtMemHandleType;

typedef struct aclrtPhysicalMemProp {
  aclrtMemHandleType handleType;
  aclrtMemAllocationType allocationType;
  aclrtMemAttr memAttr;
  aclrtMemLocation location;
  uint64_t reserve;
} aclrtPhysicalMemProp;

typedef enum aclrtMemGranularityOptions {
  ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM,
  ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED,
  ACL_RT_MEM_ALLOC_GRANULARITY_UNDEF = 0xFFFF,
} aclrtMemGranularityOptions;

/**
 * Reserve @size bytes of virtual address space (no memory behind it).  @alignment is
 * reserved (0).  @expectPtr NULL lets the library choose, and it chooses an address where
 * any allocation that fits can be mapped at the base: aligned to 1 GiB when @size is at
 * least 1 GiB (ACL_HBM_MEM_HUGE1G pages), else to 2 MiB (huge pages), whatever @flags.
 * Otherwise @expectPtr must be aligned to the granularity of @flags and free, else
 * ACL_ERROR_RT_PARAM_INVALID / ACL_ERROR_RT_MEMORY_ALLOCATION.
 * @flags: 0 normal pages (size rounded up to the page), 1 huge pages (to 2 MiB).
 */
aclError aclrtReserveMemAddress(void **virPtr, size_t size, size_t alignment, void *expectPtr,
                                uint64_t flags);
/** Release a reservation; everything mapped into it must have been unmapped first. */
aclError aclrtReleaseMemAddress(void *virPtr);
/** Allocate @size bytes (a multiple of the granularity of @prop); @flags must be 0. */
aclError aclrtMallocPhysical(aclrtDrvMemHandle *handle, size_t size,
                             const aclrtPhysicalMemProp *prop, uint64_t flags);
/** Drop the handle; the memory lives until its last mapping is unmapped. */
aclError aclrtFreePhysical(aclrtDrvMemHandle handle);
/** Map the whole allocation at @virPtr inside a reservation; @offset and @flags must be 0. */
aclError aclrtMapMem(void *virPtr, size_t size, size_t offset, aclrtDrvMemHandle handle,
                     uint64_t flags);
/** Unmap what aclrtMapMem mapped at @virPtr; the range returns to the reservation. */
aclError aclrtUnmapMem(void *virPtr);
/** Granularity of allocations with @prop (page size, or 2 MiB for huge-page attributes). */
aclError aclrtMemGetAllocationGranularity(aclrtPhysicalMemProp *prop,
                                          aclrtMemGranularityOptions option, size_t *granularity);

/*
 * Streams.  On the host every call that takes a stream is complete when it returns, so a
 * stream is only a handle that calls validate and aclrtSynchronizeStream returns at once.
 */
aclError aclrtCreateStream(aclrtStream *stream);
aclError aclrtDestroyStream(aclrtStream stream);
aclError aclrtSynchronizeStream(aclrtStream stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ACL_ACL_RT_H_ */
