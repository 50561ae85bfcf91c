// SPDX-License-Identifier: Apache-2.0
#include "runtime/profiling.h"

#include "runtime/device.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

// The opaque type of acl/acl_prof.h: what aclprofCreateConfig was given.
struct aclprofConfig {
  std::vector<uint32_t> devices;
  aclprofAicoreMetrics metrics = ACL_AICORE_NONE;
  uint64_t data_types = 0;
};

namespace hzc::runtime {

namespace {

constexpr uint64_t kKnownDataTypes =
    ACL_PROF_ACL_API | ACL_PROF_TASK_TIME | ACL_PROF_AICORE_METRICS | ACL_PROF_AICPU |
    ACL_PROF_L2CACHE | ACL_PROF_HCCL_TRACE | ACL_PROF_TRAINING_TRACE | ACL_PROF_MSPROFTX |
    ACL_PROF_RUNTIME_API | ACL_PROF_GE_API_L0 | ACL_PROF_TASK_TIME_L0 | ACL_PROF_TASK_MEMORY |
    ACL_PROF_TASK_TIME_L2 | ACL_PROF_OP_ATTR | ACL_PROF_TASK_TIME_L3 | ACL_PROF_GE_API_L1 |
    ACL_PROF_API_STATS;

struct State {
  std::mutex mu;
  bool initialized = false;
  bool started = false;
  std::set<const aclprofConfig *> live;
};

State &Prof() {
  static State state;
  return state;
}

bool KnownMetrics(aclprofAicoreMetrics m) {
  return (m >= ACL_AICORE_ARITHMETIC_UTILIZATION && m <= ACL_AICORE_MEMORY_ACCESS) ||
         m == ACL_AICORE_NONE;
}

AclStatus CheckDevices(const uint32_t *ids, uint32_t count) {
  const uint32_t devices = DeviceCount();
  if (count > devices) {
    return Error(ACL_ERROR_INVALID_PARAM, "deviceNums={}: at most {} (the device count)", count,
                 devices);
  }
  for (uint32_t i = 0; i < count; ++i) {
    if (ids[i] >= devices) {
      return Error(ACL_ERROR_INVALID_PARAM, "deviceIdList[{}]={}: device ids are below {}", i,
                   ids[i], devices);
    }
    if (std::find(ids, ids + i, ids[i]) != ids + i) {
      return Error(ACL_ERROR_INVALID_PARAM, "deviceIdList[{}]={}: listed twice", i, ids[i]);
    }
  }
  return AclStatus::Ok();
}

// @config is live; the caller holds the state's lock.
AclStatus CheckLive(const State &s, const aclprofConfig *config) {
  if (s.live.count(config) == 0) {
    return Error(ACL_ERROR_INVALID_PARAM,
                 "profilerConfig={}: not a configuration of aclprofCreateConfig or destroyed",
                 static_cast<const void *>(config));
  }
  return AclStatus::Ok();
}

}  // namespace

AclStatus ProfInit(const char *path, size_t length) {
  if (length == 0 || length > kProfMaxPathLength) {
    return Error(ACL_ERROR_INVALID_PARAM, "length={}: must be 1..{}", length, kProfMaxPathLength);
  }
  if (strnlen(path, length + 1) != length) {
    return Error(ACL_ERROR_INVALID_PARAM, "length={}: profilerResultPath has {} characters", length,
                 strnlen(path, kProfMaxPathLength + 1));
  }
  State &s = Prof();
  const std::lock_guard lock(s.mu);
  if (s.initialized) {
    return Error(ACL_ERROR_REPEAT_INITIALIZE, "profiling is already initialized");
  }
  s.initialized = true;
  return AclStatus::Ok();
}

AclStatus ProfFinalize() {
  State &s = Prof();
  const std::lock_guard lock(s.mu);
  s.initialized = false;
  s.started = false;
  return AclStatus::Ok();
}

AclStatus ProfCreateConfig(const uint32_t *ids, uint32_t count, aclprofAicoreMetrics metrics,
                           const aclprofAicoreEvents *events, uint64_t data_types,
                           aclprofConfig **out) {
  HZC_RETURN_IF_ERROR(CheckDevices(ids, count));
  if (!KnownMetrics(metrics)) {
    return Error(ACL_ERROR_INVALID_PARAM, "aicoreMetrics={}: not an aclprofAicoreMetrics",
                 static_cast<int>(metrics));
  }
  if (events != nullptr) {
    return Error(ACL_ERROR_INVALID_PARAM, "aicoreEvents={}: must be NULL",
                 static_cast<const void *>(events));
  }
  if (data_types == 0 || (data_types & ~kKnownDataTypes) != 0) {
    return Error(ACL_ERROR_INVALID_PARAM, "dataTypeConfig={:#x}: not a non-empty set of ACL_PROF_*",
                 data_types);
  }
  auto config = std::make_unique<aclprofConfig>();
  config->devices.assign(ids, ids + count);
  config->metrics = metrics;
  config->data_types = data_types;
  State &s = Prof();
  const std::lock_guard lock(s.mu);
  s.live.insert(config.get());
  *out = config.release();
  return AclStatus::Ok();
}

AclStatus ProfDestroyConfig(const aclprofConfig *config) {
  State &s = Prof();
  const std::lock_guard lock(s.mu);
  HZC_RETURN_IF_ERROR(CheckLive(s, config));
  s.live.erase(config);
  delete config;  // NOLINT(cppcoreguidelines-owning-memory): made by ProfCreateConfig
  return AclStatus::Ok();
}

AclStatus ProfStart(const aclprofConfig *config) {
  State &s = Prof();
  const std::lock_guard lock(s.mu);
  HZC_RETURN_IF_ERROR(CheckLive(s, config));
  if (!s.initialized) {
    return Error(ACL_ERROR_PROF_NOT_RUN, "aclprofInit was not called");
  }
  if (s.started) {
    return Error(ACL_ERROR_PROF_ALREADY_RUN, "profiling is already started");
  }
  s.started = true;
  return AclStatus::Ok();
}

AclStatus ProfStop(const aclprofConfig *config) {
  State &s = Prof();
  const std::lock_guard lock(s.mu);
  HZC_RETURN_IF_ERROR(CheckLive(s, config));
  if (!s.initialized) {
    return Error(ACL_ERROR_PROF_NOT_RUN, "aclprofInit was not called");
  }
  if (!s.started) {
    return Error(ACL_ERROR_PROF_NOT_RUN, "profiling was not started (aclprofStart)");
  }
  s.started = false;
  return AclStatus::Ok();
}

size_t ProfLiveConfigs() {
  State &s = Prof();
  const std::lock_guard lock(s.mu);
  return s.live.size();
}

}  // namespace hzc::runtime
