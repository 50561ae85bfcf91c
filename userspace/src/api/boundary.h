// SPDX-License-Identifier: Apache-2.0
// The C ABI boundary: every exported function runs its body through Guard(), which logs a
// failed status once ("API: message") and turns any exception into an internal error. The
// lines logged during the call name the rank of the communicator it works on (LogRankScope).
#pragma once

#include <acl/acl_base.h>
#include <hccl/hccl_types.h>

#include <exception>
#include <new>
#include <string>

#include "base/log.h"
#include "base/status.h"

namespace hzc::api {

// The codes the boundary and its checks (api/checks.h) return, per result type.
template <typename Code>
struct ErrorCodes {
  Code no_memory{};     // std::bad_alloc
  Code internal{};      // any other exception
  Code null_pointer{};  // a pointer argument is null
  Code bad_argument{};  // a reserved argument is not 0, a size is 0
};

// None but for HcclResult and aclError (Guard refuses other types).
template <typename Code>
inline constexpr ErrorCodes<Code> kErrorCodes{};
template <>
inline constexpr ErrorCodes<HcclResult> kErrorCodes<HcclResult>{HCCL_E_MEMORY, HCCL_E_INTERNAL,
                                                                HCCL_E_PTR, HCCL_E_PARA};
template <>
inline constexpr ErrorCodes<aclError> kErrorCodes<aclError>{
    ACL_ERROR_RT_MEMORY_ALLOCATION, ACL_ERROR_RT_INTERNAL_ERROR, ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_RT_PARAM_INVALID};

// The message of the calling thread's last failed call ("API: message"), for
// aclGetRecentErrMsg; empty when none since it was last read.
inline std::string &RecentError() {
  thread_local std::string message;
  return message;
}

// Log "@api: @message" as the failure of a call and keep it for aclGetRecentErrMsg.
inline void LogFailure(const char *api, const std::string &message) {
  LogError("{}: {}", api, message);
  RecentError() = fmt::format("{}: {}", api, message);
}

// Run @body (returning BasicStatus<Code>) on behalf of the C function @api.
template <typename Code, typename Body>
Code Guard(const char *api, Body &&body) noexcept {
  static_assert(kErrorCodes<Code>.internal != Code{}, "not a result type of the C API");
  const LogRankScope rank_scope;
  try {
    BasicStatus<Code> status = body();
    if (!status.ok()) {
      LogFailure(api, status.message());
    }
    return status.code();
  } catch (const std::bad_alloc &) {
    try {
      LogFailure(api, "out of memory");
    } catch (...) {
    }
    return kErrorCodes<Code>.no_memory;
  } catch (const std::exception &e) {
    try {
      LogFailure(api, std::string("internal error: ") + e.what());
    } catch (...) {
    }
    return kErrorCodes<Code>.internal;
  } catch (...) {
    return kErrorCodes<Code>.internal;
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
