// SPDX-License-Identifier: Apache-2.0
// The ACL profiling calls as no-ops that keep the state CANN checks: whether aclprofInit was
// called, whether collection was started, and which configurations are live. Nothing is
// collected and nothing is written to the result path.
#pragma once

#include <acl/acl_prof.h>

#include <cstddef>
#include <cstdint>

#include "base/status.h"

namespace hzc::runtime {

using AclStatus = BasicStatus<aclError>;

// The longest result path aclprofInit accepts (CANN's limit).
inline constexpr size_t kProfMaxPathLength = 4096;

// @path is not null; @length is its strlen.
AclStatus ProfInit(const char *path, size_t length);
AclStatus ProfFinalize();
// @ids is not null when @count > 0; @out receives a new live configuration. Device ids are
// below the device count (runtime/device: aclrtGetDeviceCount), each listed once.
AclStatus ProfCreateConfig(const uint32_t *ids, uint32_t count, aclprofAicoreMetrics metrics,
                           const aclprofAicoreEvents *events, uint64_t data_types,
                           aclprofConfig **out);
// @config is not null.
AclStatus ProfDestroyConfig(const aclprofConfig *config);
AclStatus ProfStart(const aclprofConfig *config);
AclStatus ProfStop(const aclprofConfig *config);

// For tests: the configurations not yet destroyed.
size_t ProfLiveConfigs();

}  // namespace hzc::runtime
