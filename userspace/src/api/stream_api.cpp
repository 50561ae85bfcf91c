// SPDX-License-Identifier: Apache-2.0
// ACL streams on the host (coll/stream.h): every call taking a stream completes before it
// returns, so a stream is only a handle to validate.
#pragma GCC visibility push(default)
#include <acl/acl.h>
#pragma GCC visibility pop

#include "api/boundary.h"
#include "api/checks.h"
#include "coll/stream.h"

using hzc::Error;
using hzc::api::AclGuard;
using hzc::api::NotNull;
using AclStatus = hzc::BasicStatus<aclError>;

aclError aclrtCreateStream(aclrtStream *stream) {
  return AclGuard("aclrtCreateStream", [&]() -> AclStatus {
    HZC_RETURN_IF_ERROR(NotNull<aclError>(stream, "stream"));
    *stream = hzc::coll::CreateStream();
    return AclStatus::Ok();
  });
}

aclError aclrtDestroyStream(aclrtStream stream) {
  return AclGuard("aclrtDestroyStream", [&]() -> AclStatus {
    HZC_RETURN_IF_ERROR(NotNull<aclError>(stream, "stream"));
    if (!hzc::coll::DestroyStream(stream)) {
      return Error(ACL_ERROR_RT_INVALID_HANDLE,
                   "stream={}: not a live stream (destroyed or foreign)", stream);
    }
    return AclStatus::Ok();
  });
}

aclError aclrtSynchronizeStream(aclrtStream stream) {
  return AclGuard("aclrtSynchronizeStream", [&]() -> AclStatus {
    // NULL is the default stream. Work never stays pending, so there is nothing to wait for.
    if (stream != nullptr && !hzc::coll::IsStream(stream)) {
      return Error(ACL_ERROR_RT_INVALID_HANDLE,
                   "stream={}: not a live stream (destroyed or foreign)", stream);
    }
    return AclStatus::Ok();
  });
}
