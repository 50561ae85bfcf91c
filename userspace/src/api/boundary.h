// SPDX-License-Identifier: Apache-2.0
// The C ABI boundary: every exported function runs its body through Guard(), which logs a
// failed status once ("API: message") and turns any exception into an internal error. The
// lines logged during the call name the rank of the communicator it works on (LogRankScope).
#pragma once

#include <acl/acl_base.h>
#include <hccl/hccl_types.h>

#include <exception>
#include <new>

#include "core/log.h"
#include "core/status.h"

namespace hzc::api {

template <typename Code>
struct ErrorCodes;

template <>
struct ErrorCodes<HcclResult> {
  static constexpr HcclResult kNoMemory = HCCL_E_MEMORY;
  static constexpr HcclResult kInternal = HCCL_E_INTERNAL;
};

template <>
struct ErrorCodes<aclError> {
  static constexpr aclError kNoMemory = ACL_ERROR_RT_MEMORY_ALLOCATION;
  static constexpr aclError kInternal = ACL_ERROR_RT_INTERNAL_ERROR;
};

// Run @body (returning BasicStatus<Code>) on behalf of the C function @api.
template <typename Code, typename Body>
Code Guard(const char *api, Body &&body) noexcept {
  const LogRankScope rank_scope;
  try {
    BasicStatus<Code> status = body();
    if (!status.ok()) {
      LogError("{}: {}", api, status.message());
    }
    return status.code();
  } catch (const std::bad_alloc &) {
    try {
      LogError("{}: out of memory", api);
    } catch (...) {
    }
    return ErrorCodes<Code>::kNoMemory;
  } catch (const std::exception &e) {
    try {
      LogError("{}: internal error: {}", api, e.what());
    } catch (...) {
    }
    return ErrorCodes<Code>::kInternal;
  } catch (...) {
    return ErrorCodes<Code>::kInternal;
  }
}

template <typename Body>
HcclResult HcclGuard(const char *api, Body &&body) noexcept {
  return Guard<HcclResult>(api, std::forward<Body>(body));
}

template <typename Body>
aclError AclGuard(const char *api, Body &&body) noexcept {
  return Guard<aclError>(api, std::forward<Body>(body));
}

}  // namespace hzc::api
