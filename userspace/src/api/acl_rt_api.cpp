// SPDX-License-Identifier: Apache-2.0
// aclInit/aclFinalize, devices, contexts, the SoC name, the float-overflow mode and
// aclGetRecentErrMsg: argument checks, then runtime/device.
#pragma GCC visibility push(default)
#include <acl/acl.h>
#pragma GCC visibility pop

#include <string>

#include "api/boundary.h"
#include "api/checks.h"
#include "runtime/device.h"

namespace rt = hzc::runtime;
using hzc::api::AclGuard;
using hzc::api::NotNull;
using AclStatus = hzc::BasicStatus<aclError>;

aclError aclInit(const char *configPath) {
  return AclGuard("aclInit", [&]() -> AclStatus { return rt::Init(configPath); });
}

aclError aclFinalize(void) {
  return AclGuard("aclFinalize", [&]() -> AclStatus { return rt::Finalize(); });
}

aclError aclrtSetDevice(int32_t deviceId) {
  return AclGuard("aclrtSetDevice", [&]() -> AclStatus { return rt::SetDevice(deviceId); });
}

aclError aclrtResetDevice(int32_t deviceId) {
  return AclGuard("aclrtResetDevice", [&]() -> AclStatus { return rt::ResetDevice(deviceId); });
}

aclError aclrtGetDevice(int32_t *deviceId) {
  return AclGuard("aclrtGetDevice", [&]() -> AclStatus {
    HZC_RETURN_IF_ERROR(NotNull<aclError>(deviceId, "deviceId"));
    return rt::GetDevice(deviceId);
  });
}

aclError aclrtGetDeviceCount(uint32_t *count) {
  return AclGuard("aclrtGetDeviceCount", [&]() -> AclStatus {
    HZC_RETURN_IF_ERROR(NotNull<aclError>(count, "count"));
    *count = rt::DeviceCount();
    return AclStatus::Ok();
  });
}

aclError aclrtCreateContext(aclrtContext *context, int32_t deviceId) {
  return AclGuard("aclrtCreateContext", [&]() -> AclStatus {
    HZC_RETURN_IF_ERROR(NotNull<aclError>(context, "context"));
    return rt::CreateContext(deviceId, context);
  });
}

aclError aclrtDestroyContext(aclrtContext context) {
  return AclGuard("aclrtDestroyContext", [&]() -> AclStatus {
    HZC_RETURN_IF_ERROR(NotNull<aclError>(context, "context"));
    return rt::DestroyContext(context);
  });
}

aclError aclrtSetCurrentContext(aclrtContext context) {
  return AclGuard("aclrtSetCurrentContext", [&]() -> AclStatus {
    HZC_RETURN_IF_ERROR(NotNull<aclError>(context, "context"));
    return rt::SetCurrentContext(context);
  });
}

aclError aclrtGetCurrentContext(aclrtContext *context) {
  return AclGuard("aclrtGetCurrentContext", [&]() -> AclStatus {
    HZC_RETURN_IF_ERROR(NotNull<aclError>(context, "context"));
    return rt::GetCurrentContext(context);
  });
}

aclError aclrtSetDeviceSatMode(aclrtFloatOverflowMode mode) {
  return AclGuard("aclrtSetDeviceSatMode", [&]() -> AclStatus { return rt::SetSatMode(mode); });
}

aclError aclrtGetDeviceSatMode(aclrtFloatOverflowMode *mode) {
  return AclGuard("aclrtGetDeviceSatMode", [&]() -> AclStatus {
    HZC_RETURN_IF_ERROR(NotNull<aclError>(mode, "mode"));
    *mode = rt::GetSatMode();
    return AclStatus::Ok();
  });
}

const char *aclrtGetSocName(void) {
  return rt::kSocName;
}

const char *aclGetRecentErrMsg(void) {
  // The message returned stays valid until this thread's next aclGetRecentErrMsg.
  thread_local std::string returned;
  std::string &recent = hzc::api::RecentError();
  if (recent.empty()) {
    return nullptr;
  }
  returned = std::move(recent);
  recent.clear();
  return returned.c_str();
}
