// SPDX-License-Identifier: Apache-2.0
// ACL virtual-memory calls: argument checks, then runtime/.
#pragma GCC visibility push(default)
#include <acl/acl.h>
#pragma GCC visibility pop

#include "api/boundary.h"
#include "runtime/vmm.h"

namespace rt = hzc::runtime;
using hzc::Error;
using hzc::api::AclGuard;

aclError aclrtReserveMemAddress(void **virPtr, size_t size, size_t alignment, void *expectPtr,
                                uint64_t flags) {
  return AclGuard("aclrtReserveMemAddress", [&]() -> rt::AclStatus {
    if (virPtr == nullptr) {
      return Error(ACL_ERROR_INVALID_PARAM, "virPtr is null");
    }
    if (alignment != 0) {
      return Error(ACL_ERROR_RT_PARAM_INVALID, "alignment={:#x}: reserved, must be 0", alignment);
    }
    return rt::Reserve(virPtr, size, expectPtr, flags);
  });
}

aclError aclrtReleaseMemAddress(void *virPtr) {
  return AclGuard("aclrtReleaseMemAddress", [&]() -> rt::AclStatus {
    if (virPtr == nullptr) {
      return Error(ACL_ERROR_INVALID_PARAM, "virPtr is null");
    }
    return rt::Release(virPtr);
  });
}

aclError aclrtMallocPhysical(aclrtDrvMemHandle *handle, size_t size,
                             const aclrtPhysicalMemProp *prop, uint64_t flags) {
  return AclGuard("aclrtMallocPhysical", [&]() -> rt::AclStatus {
    if (handle == nullptr) {
      return Error(ACL_ERROR_INVALID_PARAM, "handle is null");
    }
    if (prop == nullptr) {
      return Error(ACL_ERROR_INVALID_PARAM, "prop is null");
    }
    if (flags != 0) {
      return Error(ACL_ERROR_RT_PARAM_INVALID, "flags={:#x}: reserved, must be 0", flags);
    }
    return rt::MallocPhysical(handle, size, *prop);
  });
}

aclError aclrtFreePhysical(aclrtDrvMemHandle handle) {
  return AclGuard("aclrtFreePhysical", [&]() -> rt::AclStatus {
    if (handle == nullptr) {
      return Error(ACL_ERROR_INVALID_PARAM, "handle is null");
    }
    return rt::FreePhysical(handle);
  });
}

aclError aclrtMapMem(void *virPtr, size_t size, size_t offset, aclrtDrvMemHandle handle,
                     uint64_t flags) {
  return AclGuard("aclrtMapMem", [&]() -> rt::AclStatus {
    if (virPtr == nullptr) {
      return Error(ACL_ERROR_INVALID_PARAM, "virPtr is null");
    }
    if (handle == nullptr) {
      return Error(ACL_ERROR_INVALID_PARAM, "handle is null");
    }
    if (offset != 0) {
      return Error(ACL_ERROR_RT_PARAM_INVALID, "offset={:#x}: reserved, must be 0", offset);
    }
    if (flags != 0) {
      return Error(ACL_ERROR_RT_PARAM_INVALID, "flags={:#x}: reserved, must be 0", flags);
    }
    if (size == 0) {
      return Error(ACL_ERROR_RT_PARAM_INVALID, "size=0: must not be 0");
    }
    return rt::Map(virPtr, size, handle);
  });
}

aclError aclrtUnmapMem(void *virPtr) {
  return AclGuard("aclrtUnmapMem", [&]() -> rt::AclStatus {
    if (virPtr == nullptr) {
      return Error(ACL_ERROR_INVALID_PARAM, "virPtr is null");
    }
    return rt::Unmap(virPtr);
  });
}

aclError aclrtMemGetAllocationGranularity(aclrtPhysicalMemProp *prop,
                                          aclrtMemGranularityOptions option, size_t *granularity) {
  return AclGuard("aclrtMemGetAllocationGranularity", [&]() -> rt::AclStatus {
    if (prop == nullptr) {
      return Error(ACL_ERROR_INVALID_PARAM, "prop is null");
    }
    if (granularity == nullptr) {
      return Error(ACL_ERROR_INVALID_PARAM, "granularity is null");
    }
    return rt::Granularity(*prop, option, granularity);
  });
}
