// SPDX-License-Identifier: Apache-2.0
#include "runtime/device.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "base/config.h"
#include "base/errno_string.h"
#include "runtime/event.h"
#include "runtime/stream.h"

namespace hzc::runtime {

namespace {

// Handles are opaque, never reused values that do not point at memory.
constexpr uintptr_t kBase = uintptr_t{0x43} << 40;
constexpr uint32_t kMinDevices = 8;

struct Context {
  int32_t device = 0;
  bool is_default = false;
  uint64_t set_count = 0;  // aclrtSetDevice calls not yet reset (default contexts)
};

struct State {
  std::mutex mu;
  std::map<uintptr_t, Context> contexts;
  std::map<int32_t, uintptr_t> defaults;  // device -> its default context
  uint64_t made = 0;
  bool initialized = false;
  aclrtFloatOverflowMode sat_mode = ACL_RT_OVERFLOW_MODE_SATURATION;
};

State &Devices() {
  static auto *const state = new State();  // outlives static destructors
  return *state;
}

// The calling thread's current context (0: none). It may have been destroyed since.
thread_local uintptr_t t_current = 0;

AclStatus CheckDevice(int32_t device) {
  if (device < 0 || static_cast<uint32_t>(device) >= DeviceCount()) {
    return Error(ACL_ERROR_RT_INVALID_DEVICEID, "deviceId={}: devices are 0..{}", device,
                 DeviceCount() - 1);
  }
  return AclStatus::Ok();
}

uintptr_t NewHandle(State &s) {
  return kBase + (++s.made) * 0x40;
}

}  // namespace

uint32_t DeviceCount() {
  if (auto n = GetConfig().device_count) {
    return *n;
  }
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  return std::max(kMinDevices, cpus > 0 ? static_cast<uint32_t>(cpus) : kMinDevices);
}

AclStatus SetDevice(int32_t device) {
  HZC_RETURN_IF_ERROR(CheckDevice(device));
  State &s = Devices();
  const std::lock_guard lock(s.mu);
  auto it = s.defaults.find(device);
  if (it == s.defaults.end()) {
    const uintptr_t h = NewHandle(s);
    s.contexts[h] = Context{.device = device, .is_default = true, .set_count = 0};
    it = s.defaults.emplace(device, h).first;
  }
  ++s.contexts[it->second].set_count;
  t_current = it->second;
  return AclStatus::Ok();
}

AclStatus ResetDevice(int32_t device) {
  HZC_RETURN_IF_ERROR(CheckDevice(device));
  State &s = Devices();
  const std::lock_guard lock(s.mu);
  auto it = s.defaults.find(device);
  if (it == s.defaults.end()) {
    return AclStatus::Ok();  // never set (or reset as often as set): nothing to release
  }
  if (--s.contexts[it->second].set_count == 0) {
    s.contexts.erase(it->second);
    s.defaults.erase(it);
  }
  return AclStatus::Ok();
}

AclStatus GetDevice(int32_t *device) {
  State &s = Devices();
  const std::lock_guard lock(s.mu);
  auto it = s.contexts.find(t_current);
  if (it == s.contexts.end()) {
    return Error(ACL_ERROR_RT_CONTEXT_NULL,
                 "the calling thread has no context (aclrtSetDevice / aclrtCreateContext first)");
  }
  *device = it->second.device;
  return AclStatus::Ok();
}

AclStatus CreateContext(int32_t device, aclrtContext *out) {
  HZC_RETURN_IF_ERROR(CheckDevice(device));
  State &s = Devices();
  const std::lock_guard lock(s.mu);
  const uintptr_t h = NewHandle(s);
  s.contexts[h] = Context{.device = device, .is_default = false, .set_count = 0};
  t_current = h;
  *out = reinterpret_cast<aclrtContext>(h);
  return AclStatus::Ok();
}

AclStatus DestroyContext(aclrtContext context) {
  State &s = Devices();
  const std::lock_guard lock(s.mu);
  auto it = s.contexts.find(reinterpret_cast<uintptr_t>(context));
  if (it == s.contexts.end()) {
    return Error(ACL_ERROR_RT_INVALID_HANDLE,
                 "context={}: not a live context (destroyed or foreign)", context);
  }
  if (it->second.is_default) {
    return Error(ACL_ERROR_RT_PARAM_INVALID,
                 "context={}: the default context of device {} (aclrtResetDevice releases it)",
                 context, it->second.device);
  }
  s.contexts.erase(it);
  if (t_current == reinterpret_cast<uintptr_t>(context)) {
    t_current = 0;
  }
  return AclStatus::Ok();
}

AclStatus SetCurrentContext(aclrtContext context) {
  State &s = Devices();
  const std::lock_guard lock(s.mu);
  if (!s.contexts.contains(reinterpret_cast<uintptr_t>(context))) {
    return Error(ACL_ERROR_RT_INVALID_HANDLE,
                 "context={}: not a live context (destroyed or foreign)", context);
  }
  t_current = reinterpret_cast<uintptr_t>(context);
  return AclStatus::Ok();
}

AclStatus GetCurrentContext(aclrtContext *out) {
  State &s = Devices();
  const std::lock_guard lock(s.mu);
  if (!s.contexts.contains(t_current)) {
    return Error(ACL_ERROR_RT_CONTEXT_NULL, "the calling thread has no context");
  }
  *out = reinterpret_cast<aclrtContext>(t_current);
  return AclStatus::Ok();
}

AclStatus SetSatMode(aclrtFloatOverflowMode mode) {
  if (mode != ACL_RT_OVERFLOW_MODE_SATURATION && mode != ACL_RT_OVERFLOW_MODE_INFNAN) {
    return Error(ACL_ERROR_INVALID_PARAM, "mode={}: not SATURATION (0) nor INFNAN (1)",
                 static_cast<int>(mode));
  }
  State &s = Devices();
  const std::lock_guard lock(s.mu);
  s.sat_mode = mode;
  return AclStatus::Ok();
}

aclrtFloatOverflowMode GetSatMode() {
  State &s = Devices();
  const std::lock_guard lock(s.mu);
  return s.sat_mode;
}

namespace {

// @path is a readable JSON file.
AclStatus CheckConfigFile(const char *path) {
  struct stat st {};
  if (stat(path, &st) != 0) {
    return Error(ACL_ERROR_INVALID_FILE, "configPath=\"{}\": {}", path, ErrnoString(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    return Error(ACL_ERROR_INVALID_FILE, "configPath=\"{}\": not a regular file", path);
  }
  std::ifstream f(path);
  if (!f) {
    return Error(ACL_ERROR_INVALID_FILE, "configPath=\"{}\": cannot be read", path);
  }
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) {
    return Error(ACL_ERROR_INVALID_FILE, "configPath=\"{}\": cannot be read", path);
  }
  if (!nlohmann::json::accept(text)) {
    return Error(ACL_ERROR_PARSE_FILE, "configPath=\"{}\": not a JSON document", path);
  }
  return AclStatus::Ok();
}

}  // namespace

AclStatus Init(const char *path) {
  if (path != nullptr && *path != '\0') {
    HZC_RETURN_IF_ERROR(CheckConfigFile(path));
  }
  State &s = Devices();
  const std::lock_guard lock(s.mu);
  if (s.initialized) {
    return Error(ACL_ERROR_REPEAT_INITIALIZE, "ACL is already initialized (aclInit)");
  }
  s.initialized = true;
  return AclStatus::Ok();
}

AclStatus Finalize() {
  State &s = Devices();
  {
    const std::lock_guard lock(s.mu);
    if (!s.initialized) {
      return Error(ACL_ERROR_REPEAT_FINALIZE, "ACL is not initialized (aclInit)");
    }
  }
  DestroyAllStreams();
  DestroyAllEvents();
  const std::lock_guard lock(s.mu);
  s.contexts.clear();
  s.defaults.clear();
  s.initialized = false;
  return AclStatus::Ok();
}

bool Initialized() {
  State &s = Devices();
  const std::lock_guard lock(s.mu);
  return s.initialized;
}

size_t ContextCount() {
  State &s = Devices();
  const std::lock_guard lock(s.mu);
  return s.contexts.size();
}

}  // namespace hzc::runtime
