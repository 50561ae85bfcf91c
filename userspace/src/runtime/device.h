// SPDX-License-Identifier: Apache-2.0
// ACL devices and contexts on the host. A device is a slot of this host (no hardware behind
// it): there are HZC_DEVICE_COUNT of them, else max(online CPUs, 8) (a CANN server has 8 NPUs,
// and one rank per core must find a device). A context belongs to one device; each thread has
// a current context (none at first). aclrtSetDevice makes the device's default context (at
// its first aclrtSetDevice, counted per call as CANN does) the thread's current one;
// aclrtResetDevice drops one count and the default context goes when it reaches 0.
//
// Also here: aclInit/aclFinalize's state, and the float-overflow mode (stored only).
#pragma once

#include <acl/acl.h>

#include <cstddef>
#include <cstdint>

#include "base/status.h"

namespace hzc::runtime {

using AclStatus = BasicStatus<aclError>;

// The nominal SoC name aclrtGetSocName returns.
inline constexpr const char *kSocName = "Ascend910B1";

uint32_t DeviceCount();

AclStatus SetDevice(int32_t device);
AclStatus ResetDevice(int32_t device);
// The device of the calling thread's current context.
AclStatus GetDevice(int32_t *device);

AclStatus CreateContext(int32_t device, aclrtContext *out);
AclStatus DestroyContext(aclrtContext context);
AclStatus SetCurrentContext(aclrtContext context);
AclStatus GetCurrentContext(aclrtContext *out);

AclStatus SetSatMode(aclrtFloatOverflowMode mode);
aclrtFloatOverflowMode GetSatMode();

// aclInit: @path NULL or "" is no configuration, else a readable JSON file.
AclStatus Init(const char *path);
// aclFinalize: destroy every stream (after its queued work), event and context.
AclStatus Finalize();
bool Initialized();

// For tests: the live contexts (default ones included).
size_t ContextCount();

}  // namespace hzc::runtime
