// SPDX-License-Identifier: Apache-2.0
// ACL profiling calls: argument checks, then runtime/profiling (no-ops that keep CANN's state).
#pragma GCC visibility push(default)
#include <acl/acl_prof.h>
#pragma GCC visibility pop

#include "api/boundary.h"
#include "api/checks.h"
#include "runtime/profiling.h"

namespace rt = hzc::runtime;
using hzc::api::AclGuard;
using hzc::api::NotNull;

aclError aclprofInit(const char *profilerResultPath, size_t length) {
  return AclGuard("aclprofInit", [&]() -> rt::AclStatus {
    HZC_RETURN_IF_ERROR(NotNull<aclError>(profilerResultPath, "profilerResultPath"));
    return rt::ProfInit(profilerResultPath, length);
  });
}

aclError aclprofFinalize(void) {
  return AclGuard("aclprofFinalize", [&]() -> rt::AclStatus { return rt::ProfFinalize(); });
}

aclprofConfig *aclprofCreateConfig(uint32_t *deviceIdList, uint32_t deviceNums,
                                   aclprofAicoreMetrics aicoreMetrics,
                                   const aclprofAicoreEvents *aicoreEvents,
                                   uint64_t dataTypeConfig) {
  aclprofConfig *config = nullptr;
  AclGuard("aclprofCreateConfig", [&]() -> rt::AclStatus {
    if (deviceNums > 0) {
      HZC_RETURN_IF_ERROR(NotNull<aclError>(deviceIdList, "deviceIdList"));
    }
    return rt::ProfCreateConfig(deviceIdList, deviceNums, aicoreMetrics, aicoreEvents,
                                dataTypeConfig, &config);
  });
  return config;
}

aclError aclprofDestroyConfig(const aclprofConfig *profilerConfig) {
  return AclGuard("aclprofDestroyConfig", [&]() -> rt::AclStatus {
    HZC_RETURN_IF_ERROR(NotNull<aclError>(profilerConfig, "profilerConfig"));
    return rt::ProfDestroyConfig(profilerConfig);
  });
}

aclError aclprofStart(const aclprofConfig *profilerConfig) {
  return AclGuard("aclprofStart", [&]() -> rt::AclStatus {
    HZC_RETURN_IF_ERROR(NotNull<aclError>(profilerConfig, "profilerConfig"));
    return rt::ProfStart(profilerConfig);
  });
}

aclError aclprofStop(const aclprofConfig *profilerConfig) {
  return AclGuard("aclprofStop", [&]() -> rt::AclStatus {
    HZC_RETURN_IF_ERROR(NotNull<aclError>(profilerConfig, "profilerConfig"));
    return rt::ProfStop(profilerConfig);
  });
}
