// SPDX-License-Identifier: Apache-2.0
// ACL memory calls (aclrtMalloc, aclrtMemcpy, ...): argument checks, then runtime/memory; the
// asynchronous ones run on their stream's worker (runtime/stream).
#pragma GCC visibility push(default)
#include <acl/acl.h>
#pragma GCC visibility pop

#include <cstring>

#include "api/boundary.h"
#include "api/checks.h"
#include "runtime/memory.h"
#include "runtime/stream.h"

namespace rt = hzc::runtime;
using hzc::Status;
using hzc::api::AclGuard;
using hzc::api::NotNull;
using AclStatus = hzc::BasicStatus<aclError>;

namespace {

AclStatus AsAcl(const Status &st) {
  return AclStatus(static_cast<aclError>(st.code()), st.message());
}

}  // namespace

aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy) {
  return AclGuard("aclrtMalloc", [&]() -> AclStatus {
    HZC_RETURN_IF_ERROR(NotNull<aclError>(devPtr, "devPtr"));
    return rt::Malloc(devPtr, size, static_cast<uint32_t>(policy));
  });
}

aclError aclrtFree(void *devPtr) {
  return AclGuard("aclrtFree", [&]() -> AclStatus {
    HZC_RETURN_IF_ERROR(NotNull<aclError>(devPtr, "devPtr"));
    return rt::Free(devPtr);
  });
}

aclError aclrtMallocHost(void **hostPtr, size_t size) {
  return AclGuard("aclrtMallocHost", [&]() -> AclStatus {
    HZC_RETURN_IF_ERROR(NotNull<aclError>(hostPtr, "hostPtr"));
    return rt::MallocHost(hostPtr, size);
  });
}

aclError aclrtFreeHost(void *hostPtr) {
  return AclGuard("aclrtFreeHost", [&]() -> AclStatus {
    HZC_RETURN_IF_ERROR(NotNull<aclError>(hostPtr, "hostPtr"));
    return rt::FreeHost(hostPtr);
  });
}

aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count,
                     aclrtMemcpyKind kind) {
  return AclGuard("aclrtMemcpy", [&]() -> AclStatus {
    HZC_RETURN_IF_ERROR(NotNull<aclError>(dst, "dst"));
    HZC_RETURN_IF_ERROR(NotNull<aclError>(src, "src"));
    HZC_RETURN_IF_ERROR(rt::CheckMemcpy(dst, destMax, src, count, kind));
    std::memmove(dst, src, count);
    return AclStatus::Ok();
  });
}

aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count,
                          aclrtMemcpyKind kind, aclrtStream stream) {
  return AclGuard("aclrtMemcpyAsync", [&]() -> AclStatus {
    HZC_RETURN_IF_ERROR(NotNull<aclError>(dst, "dst"));
    HZC_RETURN_IF_ERROR(NotNull<aclError>(src, "src"));
    HZC_RETURN_IF_ERROR(rt::CheckMemcpy(dst, destMax, src, count, kind));
    return AsAcl(rt::Submit(stream, "aclrtMemcpyAsync", [dst, src, count]() {
      std::memmove(dst, src, count);
      return Status::Ok();
    }));
  });
}

aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count) {
  return AclGuard("aclrtMemset", [&]() -> AclStatus {
    HZC_RETURN_IF_ERROR(NotNull<aclError>(devPtr, "devPtr"));
    HZC_RETURN_IF_ERROR(rt::CheckMemset(devPtr, maxCount, count));
    std::memset(devPtr, value, count);
    return AclStatus::Ok();
  });
}

aclError aclrtMemsetAsync(void *devPtr, size_t maxCount, int32_t value, size_t count,
                          aclrtStream stream) {
  return AclGuard("aclrtMemsetAsync", [&]() -> AclStatus {
    HZC_RETURN_IF_ERROR(NotNull<aclError>(devPtr, "devPtr"));
    HZC_RETURN_IF_ERROR(rt::CheckMemset(devPtr, maxCount, count));
    return AsAcl(rt::Submit(stream, "aclrtMemsetAsync", [devPtr, value, count]() {
      std::memset(devPtr, value, count);
      return Status::Ok();
    }));
  });
}

aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t *free, size_t *total) {
  return AclGuard("aclrtGetMemInfo", [&]() -> AclStatus {
    HZC_RETURN_IF_ERROR(NotNull<aclError>(free, "free"));
    HZC_RETURN_IF_ERROR(NotNull<aclError>(total, "total"));
    return rt::MemInfo(attr, free, total);
  });
}
