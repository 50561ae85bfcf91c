// SPDX-License-Identifier: Apache-2.0
// Argument checks of the C entry points, one line each in the style of NCCL's PtrCheck and
// CommCheck:
//
//   HZC_RETURN_IF_ERROR(NotNull(comm, "comm"));          // HCCL_E_PTR "comm is null"
//   HZC_RETURN_IF_ERROR(Reserved(flags, "flags"));       // HCCL_E_PARA "flags=0x1: reserved..."
//   return WithComm(comm, [&](Communicator &c) { ... });  // HCCL_E_PARA for a dead handle
//
// A call holds its communicator (WithComm's shared_ptr) until it returns, and a call queued on
// a stream until the stream ran it: HcclCommDestroy waits for those holds (core/comm.h).
//
// The ACL calls use the same helpers with their codes: NotNull<aclError>(...).
#pragma once

#include <acl/acl_base.h>
#include <hccl/hccl_types.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "api/boundary.h"
#include "base/status.h"
#include "core/comm.h"

namespace hzc::api {

// @p is not null; otherwise "<name> is null" (HCCL_E_PTR, ACL_ERROR_INVALID_PARAM).
template <typename Code = HcclResult>
BasicStatus<Code> NotNull(const void *p, const char *name) {
  if (p == nullptr) {
    return Error(kErrorCodes<Code>.null_pointer, "{} is null", name);
  }
  return BasicStatus<Code>::Ok();
}

// A reserved argument is 0; otherwise "<name>=0x..: reserved, must be 0".
template <typename Code = HcclResult>
BasicStatus<Code> Reserved(uint64_t value, const char *name) {
  if (value != 0) {
    return Error(kErrorCodes<Code>.bad_argument, "{}={:#x}: reserved, must be 0", name, value);
  }
  return BasicStatus<Code>::Ok();
}

// A size is not 0; otherwise "<name>=0: must not be 0".
template <typename Code = HcclResult>
BasicStatus<Code> NonZero(size_t value, const char *name) {
  if (value == 0) {
    return Error(kErrorCodes<Code>.bad_argument, "{}=0: must not be 0", name);
  }
  return BasicStatus<Code>::Ok();
}

// [p, p + size) does not pass the end of the address space; otherwise
// "<name>=<p> size=0x..: <what>" (HCCL_E_PARA).
inline Status NoWrap(const void *p, size_t size, const char *name, const char *what) {
  if (reinterpret_cast<uintptr_t>(p) > UINTPTR_MAX - size) {
    return Error(HCCL_E_PARA, "{}={} size={:#x}: {}", name, p, size, what);
  }
  return Status::Ok();
}

// The communicator lookup: @fn(const std::shared_ptr<Communicator> &) on the live communicator
// behind @comm, which stays alive during the call (an HcclCommDestroy meanwhile waits until the
// call and the copies it queued on streams are done); HCCL_E_PARA for a destroyed or foreign
// handle, or one that HcclCommDestroy has begun on.
template <typename Fn>
Status WithComm(HcclComm comm, Fn &&fn) {
  auto c = CommRegistry::Process().Get(comm);
  if (!c.ok()) {
    return c.status();
  }
  return fn(*c);
}

}  // namespace hzc::api
