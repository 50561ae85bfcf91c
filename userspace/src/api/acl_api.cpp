// SPDX-License-Identifier: Apache-2.0
// ACL virtual-memory calls: argument checks, then runtime/.
#pragma GCC visibility push(default)
#include <acl/acl.h>
#pragma GCC visibility pop

#include "api/boundary.h"
#include "api/checks.h"
#include "runtime/vmm.h"

namespace rt = hzc::runtime;
using hzc::api::AclGuard;
using hzc::api::NonZero;
using hzc::api::NotNull;
using hzc::api::Reserved;

aclError aclrtReserveMemAddress(void **virPtr, size_t size, size_t alignment, void *expectPtr,
                                uint64_t flags) {
  return AclGuard("aclrtReserveMemAddress", [&]() -> rt::AclStatus {
    HZC_RETURN_IF_ERROR(NotNull<aclError>(virPtr, "virPtr"));
    HZC_RETURN_IF_ERROR(Reserved<aclError>(alignment, "alignment"));
    return rt::Reserve(virPtr, size, expectPtr, flags);
  });
}

aclError aclrtReleaseMemAddress(void *virPtr) {
  return AclGuard("aclrtReleaseMemAddress", [&]() -> rt::AclStatus {
    HZC_RETURN_IF_ERROR(NotNull<aclError>(virPtr, "virPtr"));
    return rt::Release(virPtr);
  });
}

aclError aclrtMallocPhysical(aclrtDrvMemHandle *handle, size_t size,
                             const aclrtPhysicalMemProp *prop, uint64_t flags) {
  return AclGuard("aclrtMallocPhysical", [&]() -> rt::AclStatus {
    HZC_RETURN_IF_ERROR(NotNull<aclError>(handle, "handle"));
    HZC_RETURN_IF_ERROR(NotNull<aclError>(prop, "prop"));
    HZC_RETURN_IF_ERROR(Reserved<aclError>(flags, "flags"));
    return rt::MallocPhysical(handle, size, *prop);
  });
}

aclError aclrtFreePhysical(aclrtDrvMemHandle handle) {
  return AclGuard("aclrtFreePhysical", [&]() -> rt::AclStatus {
    HZC_RETURN_IF_ERROR(NotNull<aclError>(handle, "handle"));
    return rt::FreePhysical(handle);
  });
}

aclError aclrtMapMem(void *virPtr, size_t size, size_t offset, aclrtDrvMemHandle handle,
                     uint64_t flags) {
  return AclGuard("aclrtMapMem", [&]() -> rt::AclStatus {
    HZC_RETURN_IF_ERROR(NotNull<aclError>(virPtr, "virPtr"));
    HZC_RETURN_IF_ERROR(NotNull<aclError>(handle, "handle"));
    HZC_RETURN_IF_ERROR(Reserved<aclError>(offset, "offset"));
    HZC_RETURN_IF_ERROR(Reserved<aclError>(flags, "flags"));
    HZC_RETURN_IF_ERROR(NonZero<aclError>(size, "size"));
    return rt::Map(virPtr, size, handle);
  });
}

aclError aclrtUnmapMem(void *virPtr) {
  return AclGuard("aclrtUnmapMem", [&]() -> rt::AclStatus {
    HZC_RETURN_IF_ERROR(NotNull<aclError>(virPtr, "virPtr"));
    return rt::Unmap(virPtr);
  });
}

aclError aclrtMemGetAllocationGranularity(aclrtPhysicalMemProp *prop,
                                          aclrtMemGranularityOptions option, size_t *granularity) {
  return AclGuard("aclrtMemGetAllocationGranularity", [&]() -> rt::AclStatus {
    HZC_RETURN_IF_ERROR(NotNull<aclError>(prop, "prop"));
    HZC_RETURN_IF_ERROR(NotNull<aclError>(granularity, "granularity"));
    return rt::Granularity(*prop, option, granularity);
  });
}
